"""HTML export: one self-contained page holding the whole session tree.

The page carries the session as JSON (header, every entry, the leaf, the system prompt and tools) plus
vendored marked and highlight.js and our own renderer (``render.js``); the browser renders it, so
Python does no markdown work and needs no dependency. Nothing is fetched when the page is viewed.

Nothing from the session can run as script in the page:
- the JSON sits in a ``<script type="application/json">`` data block with ``<``, ``>``, ``&``, U+2028 and
  U+2029 written as ``\\u`` escapes, so no text can close the block;
- the renderer writes session text with ``textContent`` and passes markdown through marked (raw HTML shown
  as text) and an allowlist sanitiser (see render.js);
- a Content-Security-Policy allows exactly the page's own inline scripts, by their SHA-256 hashes.

Paths follow pi: the default output is the relative file ``pi-session-<session file name without
.jsonl>.html`` in the process's cwd, and a given path is used (relative to the cwd) and returned as given.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from functools import lru_cache
from typing import Any

import msgspec

from pisces import __version__
from pisces.core.safe_open import UnsafeFileError, write_atomic
from pisces.core.store import RawEntry, SessionInfoEntry, load_session_file
from pisces.core.store.entries import no_surrogates

__all__ = ["ExportError", "export_session", "export_file", "render_html", "default_output_path"]

# os.path, not pathlib or html: this module is imported by the first export of an RPC process, and those two
# would bring urllib.parse, ipaddress and html.entities with them (~6 ms) for a path join and an escape.
_HERE = os.path.dirname(os.path.realpath(__file__))
_VENDOR = os.path.join(_HERE, "vendor")
_PLACEHOLDER = re.compile(rb"\{\{([A-Z_]+)\}\}")


class ExportError(Exception):
    """A user-facing export failure (its text is the RPC error string / the CLI message)."""


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, RawEntry):
        return obj.data
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)


def _script_safe_json(data: bytes) -> bytes:
    """JSON that cannot end its ``<script>`` element or be misread as markup. ``< > &`` only occur inside
    strings in JSON, where ``\\u003c`` etc. mean the same character."""
    data = data.replace(b"&", b"\\u0026").replace(b"<", b"\\u003c").replace(b">", b"\\u003e")
    if b"\xe2" not in data:  # no byte that starts U+2028 or U+2029: skip two slow 3-byte searches (~3 ms on 2 MB)
        return data
    return data.replace("\u2028".encode(), b"\\u2028").replace("\u2029".encode(), b"\\u2029")


def _read_bytes(*parts: str) -> bytes:
    with open(os.path.join(*parts), "rb") as f:
        return f.read()


def _read_text(*parts: str) -> str:
    """A packaged text file as ``Path.read_text`` gives it (UTF-8, universal newlines)."""
    return _read_bytes(*parts).decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def _escape_html(text: str) -> str:
    """``html.escape(text, quote=True)``."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
            .replace("'", "&#x27;"))


def _inline_js(source: str) -> str:
    """A script's text made safe to inline: no ``<!--``, ``<script`` or ``</script`` in it, which the HTML
    parser would act on. In the vendored files these only occur inside regular expression literals, where
    ``\\x3C`` means ``<``."""
    if "sourceMappingURL" in source:  # the multi-line search costs ~1 ms over these files; skip it when moot
        source = re.sub(r"^//# sourceMappingURL=.*$", "", source, flags=re.M)
    source = re.sub(r"<(?=!--|/?script)", r"\\x3C", source, flags=re.I)
    return source


@lru_cache(maxsize=1)
def _static_parts() -> tuple[bytes, bytes, bytes]:
    """The page around its two variable parts (title, session JSON), built once per process."""
    scripts = {
        "MARKED_JS": _inline_js(_read_text(_VENDOR, "marked.umd.js")),
        "HIGHLIGHT_JS": _inline_js(_read_text(_VENDOR, "highlight.min.js")),
        "RENDER_JS": _inline_js(_read_text(_HERE, "render.js")),
    }
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(s.encode("utf-8")).digest()).decode() + "'"
        for s in scripts.values()
    )
    csp = (f"default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; img-src data:; "
           "font-src 'none'; connect-src 'none'; media-src 'none'; object-src 'none'; frame-src 'none'; "
           "worker-src 'none'; base-uri 'none'; form-action 'none'")

    values: dict[str, bytes] = {name: text.encode("utf-8") for name, text in scripts.items()}
    values["CSP"] = csp.encode()
    values["GENERATOR"] = f"pisces {__version__}".encode()
    for name, file in (("HLJS_LIGHT_CSS", "github.min.css"), ("HLJS_DARK_CSS", "github-dark.min.css")):
        css = _read_bytes(_VENDOR, file)
        if b"</" in css:
            raise RuntimeError(f"vendored {file} cannot be inlined")
        values[name] = css
    template = _read_bytes(_HERE, "template.html")
    pieces: list[bytes] = []
    holes: list[str] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(template):
        pieces.append(template[pos:m.start()])
        holes.append(m.group(1).decode())
        pos = m.end()
    pieces.append(template[pos:])
    # Join everything static; keep TITLE and SESSION_DATA as the two holes.
    out: list[bytes] = [b""]
    for piece, hole in zip(pieces, holes + [""], strict=False):
        out[-1] += piece
        if hole in ("TITLE", "SESSION_DATA"):
            out.append(b"")
        elif hole:
            out[-1] += values[hole]
    if (holes.count("TITLE") != 1 or holes.count("SESSION_DATA") != 1
            or holes.index("TITLE") > holes.index("SESSION_DATA")):
        raise RuntimeError("export template must hold {{TITLE}} and then {{SESSION_DATA}} once each")
    return out[0], out[1], out[2]


def _page_title(name: str | None, header: Any) -> str:
    session_id = getattr(header, "id", "") or ""
    title = name or (f"Session {session_id}" if session_id else "Session")
    return " ".join(title.split())[:120] + " - pisces session"


def render_html(header: Any, entries: list[Any], leaf_id: str | None, *, session_name: str | None = None,
                system_prompt: str | None = None, tools: list[dict[str, Any]] | None = None) -> bytes:
    """The whole page as bytes. ``header`` and ``entries`` are the store's structs (or RawEntry)."""
    data: dict[str, Any] = {"format": "pisces-session-export/1", "header": header, "entries": entries,
                            "leafId": leaf_id}
    if system_prompt:
        data["systemPrompt"] = system_prompt
    if tools:
        data["tools"] = tools
    try:
        encoded = _encoder.encode(data)
    except UnicodeEncodeError:  # a cwd or path that is not UTF-8: shown with U+FFFD, as the session file has it
        encoded = _encoder.encode(no_surrogates(msgspec.to_builtins(data, enc_hook=_enc_hook)))
    blob = _script_safe_json(encoded)
    head, middle, tail = _static_parts()
    title = _escape_html(no_surrogates(_page_title(session_name, header))).encode("utf-8")
    return b"".join((head, title, middle, blob, tail))


def default_output_path(session_file: str) -> str:
    """pi's default: ``pi-session-<basename without .jsonl>.html``, relative to the process cwd."""
    base = os.path.basename(session_file)
    if base.endswith(".jsonl"):
        base = base[: -len(".jsonl")]
    return f"pi-session-{base}.html"


def _write(path: str, data: bytes) -> None:
    try:
        # never into a FIFO or a device; a failed write leaves the old page whole. Not fsynced: the page can be
        # exported again, and the two fsyncs of a 2 MB page cost more than the whole rest of an export.
        write_atomic(path, data, durable=False)
    except OSError as exc:
        raise ExportError(f"Cannot write {path}: {exc.strerror or exc}") from exc


def _tools_of(session: Any) -> list[dict[str, Any]]:
    out = []
    for tool in getattr(getattr(session, "agent", None), "tools", None) or []:
        name = getattr(tool, "name", None)
        if isinstance(name, str):
            description = getattr(tool, "description", "")
            out.append({"name": name, "description": description if isinstance(description, str) else ""})
    return out


def export_session(session: Any, output_path: str | None) -> str:
    """Export an AgentSession's whole tree. Returns the path to report (``output_path`` as given, or the
    default relative name). Raises :class:`ExportError` with pi's messages when there is nothing on disk."""
    page = render_session(session)
    path = output_path or default_output_path(session.store.get_session_file())
    _write(path, page)
    return path


def render_session(session: Any) -> bytes:
    """An AgentSession's whole tree as the page's bytes (the web mode's download)."""
    store = session.store
    session_file = store.get_session_file() if store.is_persisted() else None
    if not session_file:
        raise ExportError("Cannot export in-memory session to HTML")
    if not os.path.exists(session_file):
        raise ExportError("Nothing to export yet - start a conversation first")
    system_prompt = getattr(getattr(session, "agent", None), "system_prompt", None)
    if callable(system_prompt):
        system_prompt = system_prompt()
    page = render_html(store.get_header(), store.get_entries(), store.get_leaf_id(),
                       session_name=store.get_session_name(),
                       system_prompt=system_prompt if isinstance(system_prompt, str) else None,
                       tools=_tools_of(session))
    return page


def export_file(session_jsonl_path: str, out_path: str | None = None) -> str:
    """Export a session file (``pisces --export``). The leaf is the file's last entry, as when it is opened."""
    if os.path.isdir(session_jsonl_path):
        raise ExportError(f"{session_jsonl_path} is a directory, not a session file")
    if not os.path.exists(session_jsonl_path):
        raise ExportError(f"File not found: {session_jsonl_path}")
    try:
        loaded = load_session_file(session_jsonl_path)
    except UnsafeFileError as exc:  # a FIFO or a device given as the session
        raise ExportError(f"Cannot export {session_jsonl_path}: {exc.reason}") from None
    if loaded is None:
        raise ExportError(f"Cannot read {session_jsonl_path}")
    if loaded.header is None:
        raise ExportError(f"Not a session file (no session header on its first line): {session_jsonl_path}")
    entries = loaded.entries
    name = None
    for entry in entries:
        if isinstance(entry, SessionInfoEntry) and isinstance(entry.name, str) and entry.name:
            name = entry.name
    page = render_html(loaded.header, entries, entries[-1].id if entries else None, session_name=name)
    path = out_path or default_output_path(session_jsonl_path)
    _write(path, page)
    return path
