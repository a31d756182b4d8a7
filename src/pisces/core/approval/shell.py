"""What the approval policy needs to know about a shell command, without running anything.

* ``has_control(command)``: whether the command contains any shell control character or substitution
  (``; & | < > ` $ ( )``, a newline or a carriage return), quoted or not. An ``allow`` rule never matches
  such a command: it must cover the whole command, and a command that chains, redirects or substitutes
  is more than the text a person allow-listed.
* ``segments(command)``: every simple command in it: the parts between ``;``, ``&&``, ``||``, ``|``, ``&``,
  newlines and parentheses, the insides of ``$(…)``, backticks and ``<(…)``/``>(…)`` (also within double
  quotes), and the script given to ``bash -c``/``sh -c``/``eval``. ``deny`` and ``prompt`` rules match any
  of them, so ``rm *`` catches ``make && rm -rf build`` and ``echo "$(rm -rf x)"``.
* ``danger(command)``: a short description when the command is known to be dangerous (``rm -rf /``, a fork
  bomb, a downloaded script piped to a shell, formatting a disk, shutting the machine down, the system's
  password files, a recursive permission change of a system directory), else None. Such a command always
  asks, whatever the mode and the allow rules say.

The patterns run on RE2 (linear time, whatever the model writes); the caller runs all of this off the event
loop.
"""

from __future__ import annotations

import shlex
from typing import Any

CONTROL_CHARS = frozenset(";&|<>`$()\n\r")
_SEPARATORS = frozenset(";&|\n\r()")
_MAX_DEPTH = 6
_KEYWORDS = frozenset({"then", "do", "else", "elif", "if", "while", "until", "!", "{", "}", "time", "coproc"})
_WRAPPERS = frozenset({"sudo", "doas", "command", "builtin", "exec", "nohup", "env", "nice", "ionice", "stdbuf",
                       "timeout", "xargs", "setsid", "chroot", "runuser", "chrt", "taskset", "flock", "unbuffer",
                       "caffeinate"})
# the options of a wrapper that take a value (``sudo -u root``), and the positional words some wrappers take
# before the command (``timeout 5``, ``chroot /srv``, ``taskset 0x1``)
_WRAPPER_VALUE_OPTS = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user", "--group", "--host",
                       "--prompt", "--chdir", "--close-from", "--role", "--type", "--other-user",
                       "--command-timeout"}),
    "doas": frozenset({"-u", "-C"}), "runuser": frozenset({"-u", "-g", "-G", "--user", "--group"}),
    "env": frozenset({"-u", "-C", "--unset", "--chdir"}), "timeout": frozenset({"-s", "-k", "--signal",
                                                                                "--kill-after"}),
    "nice": frozenset({"-n", "--adjustment"}), "ionice": frozenset({"-c", "-n", "-p", "--class", "--classdata"}),
    "xargs": frozenset({"-I", "-n", "-L", "-P", "-d", "-E", "-s", "-a", "--max-args", "--max-procs",
                        "--delimiter", "--arg-file", "--max-lines", "--max-chars", "--eof"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}), "chrt": frozenset(), "taskset": frozenset(),
    "flock": frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"}),
}
_WRAPPER_POSITIONALS = {"timeout": 1, "chroot": 1, "taskset": 1, "chrt": 1, "flock": 1}
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "ash", "busybox"})
_ROOTISH_DIRS = ("bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "opt", "proc", "root", "sbin", "srv",
                 "sys", "usr", "var", "Users", "System", "Library", "Applications")


_INTERPRETERS = frozenset({"python", "python2", "python3", "node", "nodejs", "perl", "ruby", "php", "bun", "deno",
                           "lua", "osascript", "pwsh", "powershell"})
_CODE_FLAGS = frozenset({"-c", "-e", "-E", "-r", "--eval", "--command", "--exec", "-x"})


def has_control(command: str) -> bool:
    return any(c in CONTROL_CHARS for c in command)


def reinterprets(command: str) -> bool:
    """Whether a word of the command is run as code by the program it is given to: ``eval …``, ``bash -c
    …``, ``python -c …``, ``node -e …``, ``perl -e …``. An ``allow`` rule does not match such a command either:
    what runs is the quoted text, which a ``*`` in the rule could cover with anything."""
    for part in _split(command)[0]:
        ws = _strip_prefix(words(part))
        if not ws:
            continue
        head = ws[0].rsplit("/", 1)[-1]
        if head == "eval" or head == "source" or head == ".":
            return True
        base = head.rstrip("0123456789.")
        if head in _SHELLS or head in _INTERPRETERS or base in _INTERPRETERS:
            if any(w in _CODE_FLAGS or (w.startswith("-") and not w.startswith("--") and "c" in w[1:])
                   for w in ws[1:]):
                return True
    return False


def normalize(text: str) -> str:
    """Runs of whitespace become one space; leading and trailing whitespace goes."""
    return " ".join(text.split())


# ---------------------------------------------------------------------------------------------
# Segments
# ---------------------------------------------------------------------------------------------
def _skip_quoted(text: str, i: int, nested: list[str]) -> int:
    """The index just after the escape, single- or double-quoted string that starts at ``i`` (substitutions
    inside a double-quoted one are added to ``nested``), or -1 when none starts there."""
    c = text[i]
    if c == "\\":
        return i + 2
    if c == "'":
        j = text.find("'", i + 1)
        return len(text) if j < 0 else j + 1
    if c == '"':
        return _close_quote(text, i + 1, nested) + 1
    return -1


def _skip_substitution(text: str, i: int, nested: list[str], openers: str = "$") -> int:
    """The index just after the ``$(…)`` (or ``<(…)``/``>(…)``, as ``openers`` allows) or backtick
    substitution that starts at ``i``, whose inside is added to ``nested``; -1 when none starts there."""
    if text[i] in openers and text.startswith("(", i + 1):
        end = _close_paren(text, i + 2)
        nested.append(text[i + 2:end])
        return end + 1
    if text[i] == "`":
        end = _close_backtick(text, i + 1)
        nested.append(text[i + 1:end])
        return end + 1
    return -1


def _close_paren(text: str, start: int) -> int:
    """The index of the ``)`` closing the ``(`` just before ``start`` (len(text) when unbalanced)."""
    depth, i, n = 1, start, len(text)
    while i < n:
        after = _skip_quoted(text, i, [])
        if after >= 0:
            i = after
            continue
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return n


def _close_backtick(text: str, start: int) -> int:
    i, n = start, len(text)
    while i < n:
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "`":
            return i
        i += 1
    return n


def _close_quote(text: str, start: int, nested: list[str]) -> int:
    """The index of the ``"`` closing a double-quoted string opened before ``start``; substitutions inside it
    are added to ``nested``."""
    i, n = start, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i
        after = _skip_substitution(text, i, nested)
        i = after if after >= 0 else i + 1
    return n


def _split(text: str) -> tuple[list[str], list[str]]:
    """(the simple commands at this level, the texts of the substitutions found in them)."""
    parts: list[str] = []
    nested: list[str] = []
    start, i, n = 0, 0, len(text)

    def cut(at: int) -> None:
        piece = text[start:at].strip()
        if piece:
            parts.append(piece)

    while i < n:
        after = _skip_quoted(text, i, nested)
        if after < 0:  # $(…), <(…), >(…), `…`: a command inside a command
            after = _skip_substitution(text, i, nested, "$<>")
        if after >= 0:
            i = after
            continue
        if text[i] in _SEPARATORS:
            cut(i)
            start = i + 1
        i += 1
    cut(n)
    return parts, nested


def words(segment: str) -> list[str]:
    """The segment's words with quotes removed (a plain split when the quoting is broken)."""
    try:
        return shlex.split(segment, comments=False, posix=True)
    except ValueError:
        return segment.split()


def _strip_prefix(ws: list[str]) -> list[str]:
    """Without leading keywords, ``VAR=value`` assignments and wrappers (sudo, env, nohup, ...) and their
    options."""
    i = 0
    while i < len(ws):
        w = ws[i]
        if w in _KEYWORDS or _is_assignment(w):
            i += 1
        elif w.rsplit("/", 1)[-1] in _WRAPPERS:
            name = w.rsplit("/", 1)[-1]
            takes = _WRAPPER_VALUE_OPTS.get(name, frozenset())
            i += 1
            while i < len(ws) and (ws[i].startswith("-") or _is_assignment(ws[i])):
                i += 2 if ws[i] in takes else 1
            i += _WRAPPER_POSITIONALS.get(name, 0) if i < len(ws) and (
                name != "timeout" or ws[i][:1].isdigit()) else 0  # timeout's duration, chroot's root, ...
        else:
            break
    return ws[i:]


def _is_assignment(word: str) -> bool:
    name, eq, _ = word.partition("=")
    return bool(eq) and bool(name) and (name[0].isalpha() or name[0] == "_") and \
        all(ch.isalnum() or ch == "_" for ch in name)


def _inner_scripts(ws: list[str]) -> list[str]:
    """The script of ``bash -c SCRIPT`` and the text of ``eval WORDS``."""
    if not ws:
        return []
    head = ws[0].rsplit("/", 1)[-1]
    if head == "eval":
        return [" ".join(ws[1:])]
    if head in _SHELLS:
        for k, w in enumerate(ws[1:], start=1):
            if w.startswith("-") and not w.startswith("--") and "c" in w[1:] and k + 1 < len(ws):
                return [ws[k + 1]]
    return []


def segments(command: str, _depth: int = 0) -> list[str]:
    """Every simple command in ``command`` (whitespace-normalized), nested ones included; each also without
    its leading assignments and wrappers when that differs."""
    out: list[str] = []
    parts, nested = _split(command)
    for part in parts:
        out.append(normalize(part))
        ws = words(part)
        core = _strip_prefix(ws)
        if core and len(core) != len(ws):
            out.append(normalize(" ".join(core)))
        if _depth < _MAX_DEPTH:
            for script in _inner_scripts(core):
                out.extend(segments(script, _depth + 1))
    if _depth < _MAX_DEPTH:
        for text in nested:
            out.extend(segments(text, _depth + 1))
    return list(dict.fromkeys(s for s in out if s))


# ---------------------------------------------------------------------------------------------
# Known-dangerous commands
# ---------------------------------------------------------------------------------------------
_PATTERNS: list[tuple[Any, str]] | None = None
_FETCH = r"\b(?:curl|wget|fetch|aria2c)\b"
_ELEVATE = r"(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+(?:\S+=\S*\s+)*)?(?:\S*/)?"
# a shell given the download, with any arguments (`| bash -s -- --flag`); an interpreter only when it reads its
# program from stdin (`| python3`, `| node -`), not when it runs a module or a script on the data
_RUNNER = _ELEVATE + r"(?:(?:(?:ba|z|k|da|fi|tc|c|a)?sh)\b|(?:python[0-9.]*|perl|ruby|node|php|bun|deno)" \
                     r"(?:\s+-)?\s*(?:$|[;&|)\n]))"


def _patterns() -> list[tuple[Any, str]]:
    global _PATTERNS
    if _PATTERNS is None:
        import re2  # noqa: PLC0415 - google-re2: linear time on any input; imported on the first bash call

        opts = re2.Options()
        opts.max_mem = 64 << 20
        table = [
            (r"[A-Za-z_:][\w:.-]*\s*\(\s*\)\s*\{[^}]*\|[^}]*&[^}]*\}", "a fork bomb"),
            (_FETCH + r"[^|\n]*\|\s*(?:\|\s*)?" + _RUNNER, "it downloads a script and runs it"),
            (r"(?:(?:ba|z|k|da)?sh|source|\.|eval|python[0-9.]*|perl|ruby|node)\s+(?:-\S+\s+)*[\"']?"
             r"(?:\$\(|`|<\()\s*" + _FETCH, "it downloads a script and runs it"),
            (r"\bmkfs(?:\.\w+)?\b", "it formats a disk"),
            (r"\bdd\b[^\n]*\bof=/dev/(?:sd|hd|nvme|xvd|vd|disk|mmcblk|rdisk)", "it overwrites a disk"),
            (r">\s*/dev/(?:sd|hd|nvme|xvd|vd|disk|mmcblk|rdisk)\w*", "it overwrites a disk"),
            (r"\b(?:wipefs|shred|blkdiscard)\b[^\n]*/dev/", "it wipes a disk"),
            (r"/etc/(?:passwd|shadow|gshadow|sudoers)\b", "it touches the system's password or sudo files"),
            (r"--no-preserve-root\b", "it deletes the root directory"),
        ]
        _PATTERNS = [(re2.compile(p, opts), why) for p, why in table]
    return _PATTERNS


def _rootish(arg: str) -> bool:
    a = arg.strip().rstrip("*").rstrip("/") if arg.strip() not in ("/", "/*") else "/"
    if a in ("/", "", "~", "$HOME", "${HOME}", "~root"):
        return True
    if a.startswith("/") and a.count("/") == 1 and a[1:] in _ROOTISH_DIRS:
        return True
    return False


def _danger_in(ws: list[str]) -> str | None:
    if not ws:
        return None
    head = ws[0].rsplit("/", 1)[-1]
    args = ws[1:]
    flags = [a for a in args if a.startswith("-") and a != "-"]
    targets = [a for a in args if not a.startswith("-")]
    if head == "rm":
        recursive = any(f in ("--recursive", "-r", "-R") or (not f.startswith("--") and ("r" in f or "R" in f))
                        for f in flags)
        if recursive and any(_rootish(t) for t in targets):
            return "a recursive delete of / or a top-level system or home directory"
    if head in ("chmod", "chown", "chgrp"):
        recursive = any(f in ("-R", "--recursive") or (not f.startswith("--") and "R" in f) for f in flags)
        if recursive and any(_rootish(t) for t in targets[1:]):  # the first is the mode, owner or group
            return "a recursive permission change of / or a top-level system directory"
    if head in ("shutdown", "reboot", "halt", "poweroff"):
        return "it shuts the machine down or restarts it"
    if head in ("init", "telinit") and targets[:1] in (["0"], ["6"]):
        return "it shuts the machine down or restarts it"
    if head == "systemctl" and any(t in ("poweroff", "reboot", "halt", "kexec", "suspend", "hibernate")
                                   for t in targets):
        return "it shuts the machine down or restarts it"
    return None


def danger(command: str) -> str | None:
    """Why ``command`` is known to be dangerous, or None."""
    for pattern, why in _patterns():
        if pattern.search(command):
            return why
    for segment in segments(command):
        found = _danger_in(_strip_prefix(words(segment)))
        if found is not None:
            return found
    return None
