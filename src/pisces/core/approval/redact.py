"""What an approval request shows: the identity (never truncated), the input (bounded), secrets redacted in both.

Redaction, for every string the request carries:
* a key that names a secret (it contains ``authorization``, ``cookie``, ``credential``, ``password``,
  ``passwd``, ``passphrase``, ``secret``, ``token``, ``apikey``, ``privatekey``, ``accesskey`` or
  ``sessionkey``, ignoring case, ``_``, ``-`` and ``.``) has its value replaced by ``"[redacted]"``;
* the values of an ``env``/``environment`` object are redacted, its keys kept;
* inside strings: private key blocks, tokens of well-known shapes (``sk-…``, ``ghp_…``, ``github_pat_…``,
  ``xox?-…``, ``AKIA…``, ``AIza…``, ``glpat-…``, JWTs, …), ``Authorization:``/``Cookie:``/``X-Api-Key:``
  header values, ``Bearer``/``Basic`` credentials, the password of ``scheme://user:password@host``, and the
  value of ``NAME=value``, ``NAME: value`` and ``--name value`` where the name contains token, secret,
  password, passwd, api key, access key, private key, account key or credential;
* the password options of common command-line tools: ``curl``/``http``/``xh`` ``-u``/``--user``/
  ``--proxy-user``/``-a user:PASSWORD``, ``mysql``/``mariadb``/``mysqldump`` ``-pPASSWORD``, ``sshpass -p``,
  ``redis-cli -a``/``--pass``/``AUTH``, ``scheme://:PASSWORD@``, ``aws configure set <secret/token/key> V``,
  ``az``/``docker``/``podman``/``helm``/``mongosh`` ``-p V``, ``gcloud --password``/``--access-token``,
  ``sqlcmd -P``, ``ldapsearch -w``, ``smbclient -U user%PASSWORD``, ``openssl -pass pass:V``.
The redacted places are reported as dotted paths (``input.api_key``, ``identity.command``).

Bounds: the identity (command, path, content, edits) is never shortened; one larger than
``IDENTITY_MAX_BYTES`` cannot be shown, and ``IdentityTooLarge`` says so (the call is then denied: nobody can
approve what they cannot see). The input is shortened to fit: strings to ``STRING_MAX`` characters, at most
``ITEMS_MAX`` items per array or object, ``DEPTH_MAX`` levels and ``NODES_MAX`` values in all; what was
shortened is reported as dotted paths too.
"""

from __future__ import annotations

from typing import Any

REDACTED = "[redacted]"
IDENTITY_MAX_BYTES = 256 * 1024
PATH_MAX_BYTES = 4096
STRING_MAX = 8192
ITEMS_MAX = 32
DEPTH_MAX = 4
NODES_MAX = 256

_SECRET_WORDS = ("authorization", "cookie", "credential", "password", "passwd", "passphrase", "secret", "token",
                 "apikey", "privatekey", "accesskey", "sessionkey")
_ENV_KEYS = ("env", "environment")
_NAME = (r"[A-Za-z0-9_.-]*(?:token|secret|passw(?:or)?d|passphrase|api[_-]?key|access[_-]?key|private[_-]?key|"
         r"account[_-]?key|credential|mysql_pwd|rediscli_auth)[A-Za-z0-9_.-]*")
# a command-line value: quoted, or a run of characters up to a space, a quote or a shell control character
_ARG = r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"';&|)]+)"
# the rest of one simple command after a program's name (no newline, ;, & or |)
_REST = r"\b[^\n;&|]*?\s"
_VALUE = r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;&|)]+)"
_compiled: list[tuple[Any, Any]] | None = None


class IdentityTooLarge(ValueError):
    """The command, path or content to approve is too large to show in a request."""


def sensitive_key(key: str) -> bool:
    k = key.lower().replace("_", "").replace("-", "").replace(".", "")
    return any(word in k for word in _SECRET_WORDS)


def _patterns() -> list[tuple[Any, Any]]:
    global _compiled
    if _compiled is None:
        import re2  # noqa: PLC0415 - linear time on whatever the model wrote

        opts = re2.Options()
        opts.max_mem = 64 << 20
        opts.case_sensitive = True

        def keep(*groups: int) -> Any:
            return lambda m: "".join(m.group(g) if g > 0 else REDACTED for g in groups)

        table = [
            (r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)",
             lambda m: REDACTED),
            (r"\b(?:sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}|sk_(?:live|test)_[A-Za-z0-9]{16,}|"
             r"rk_(?:live|test)_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|"
             r"xox[abposr]-[A-Za-z0-9-]{10,}|(?:AKIA|ASIA)[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|glpat-[A-Za-z0-9_-]{20,}|"
             r"npm_[A-Za-z0-9]{30,}|hf_[A-Za-z0-9]{30,}|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
             lambda m: REDACTED),
            (r"(?i)\b((?:proxy-)?authorization|cookie|set-cookie|x-api-key|api-key|x-auth-token)(\s*[:=]\s*)"
             r"(\"[^\"\n]*\"|'[^'\n]*'|[^\n\"']+)", keep(1, 2, 0)),
            (r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{6,}", keep(1, 2, 0)),
            (r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@\"']+:)([^\s@/\"']+)(@)", keep(1, 0, 3)),
            (r"(?i)(" + _NAME + r")(\s*[=:]\s*)" + _VALUE, keep(1, 2, 0)),
            (r"(?i)(--?" + _NAME + r")(\s+)(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'-][^\s\"']*)", keep(1, 2, 0)),
            # programs whose password is an option's value (see the module's docstring)
            (r"(\b(?:curl|http|https|xh|ab)" + _REST + r"(?:-u|--user|--proxy-user|-U|-a|--auth|-A)(?:\s+|=)?[\"']?"
             r"[^\s:\"']*:)([^\s\"']+)", keep(1, 0)),
            (r"(\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mysqlsh|mariadb|mariadb-dump)"
             + _REST + r"-p)" + _ARG, keep(1, 0)),
            (r"(\bsshpass" + _REST + r"-p\s*)" + _ARG, keep(1, 0)),
            (r"(?i)(\bredis-cli" + _REST + r"(?:-a|--pass)\s+)" + _ARG, keep(1, 0)),
            (r"(?i)(\bredis-cli" + _REST + r"auth\s+)" + _ARG, keep(1, 0)),
            (r"(\b(?:az|docker|podman|helm|buildah|skopeo|oras|mongo|mongosh|mongodump|mongorestore|mongoimport|"
             r"mongoexport|nmcli|htpasswd -b \S+ \S+)" + _REST + r"-p(?:\s+|=))" + _ARG, keep(1, 0)),
            (r"(\b(?:sqlcmd|bcp|isql|osql)" + _REST + r"-P\s*)" + _ARG, keep(1, 0)),
            (r"(\bldap[a-z]*" + _REST + r"-w\s+)" + _ARG, keep(1, 0)),
            (r"(\b(?:smbclient|rpcclient|smbmap|smbget|net)" + _REST + r"-U\s*[^\s%]+%)" + _ARG, keep(1, 0)),
            (r"(?i)(\b(?:config|configure)\s+(?:set\s+)?(?:--?\S+\s+)*\S*(?:secret|token|passw(?:or)?d|auth|"
             r"(?:access|api|private|account)[_-]?key)\S*\s+)" + _ARG, keep(1, 0)),
            (r"(\b(?:echo|printf)\s+)" + _ARG + r"(\s*\|\s*[^\n;&|]*--password-stdin)", keep(1, 0, 3)),
            (r"(?i)(\bgcloud" + _REST + r"--(?:password|access-token|client-secret|secret)(?:\s+|=))" + _ARG,
             keep(1, 0)),
            (r"(\s-(?:pass(?:in|out)?|passwd|k)\s+(?:pass|env):)" + _ARG, keep(1, 0)),
            (r"(?i)(\b[a-z][a-z0-9+.-]*://:)([^\s@/\"']+)(@)", keep(1, 0, 3)),
        ]
        _compiled = [(re2.compile(p, opts), repl) for p, repl in table]
    return _compiled


def redact_text(text: str) -> str:
    """``text`` with the secrets in it replaced by ``[redacted]``."""
    if not text:
        return text
    for pattern, repl in _patterns():
        text = pattern.sub(repl, text)
    return text


class _Walk:
    def __init__(self) -> None:
        self.redacted: list[str] = []
        self.truncated: list[str] = []
        self.nodes = 0

    def text(self, value: str, where: str, *, bound: bool) -> str:
        out = redact_text(value)
        if out != value:
            self.redacted.append(where)
        if bound and len(out) > STRING_MAX:
            self.truncated.append(where)
            out = out[:STRING_MAX] + f"… [{len(out) - STRING_MAX} more characters]"
        return out

    def value(self, value: Any, where: str, depth: int, *, env: bool = False) -> Any:
        self.nodes += 1
        if isinstance(value, str):
            if env:
                self.redacted.append(where)
                return REDACTED
            return self.text(value, where, bound=True)
        if isinstance(value, (bool, int, float)) or value is None:
            if env:
                self.redacted.append(where)
                return REDACTED
            return value
        if depth >= DEPTH_MAX:
            self.truncated.append(where)
            return "[…]"
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for i, (key, item) in enumerate(value.items()):
                path = f"{where}.{key}"
                if i >= ITEMS_MAX or self.nodes >= NODES_MAX:
                    self.truncated.append(where)
                    break
                if env or sensitive_key(str(key)):
                    self.redacted.append(path)
                    out[str(key)] = REDACTED
                    self.nodes += 1
                    continue
                out[str(key)] = self.value(item, path, depth + 1, env=str(key).lower() in _ENV_KEYS)
            return out
        if isinstance(value, (list, tuple)):
            items: list[Any] = []
            for i, item in enumerate(value):
                if i >= ITEMS_MAX or self.nodes >= NODES_MAX:
                    self.truncated.append(where)
                    break
                items.append(self.value(item, f"{where}[{i}]", depth + 1, env=env))
            return items
        return self.text(str(value), where, bound=True)


def redact_input(args: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
    """(the redacted, bounded input, the redacted paths, the truncated paths)."""
    walk = _Walk()
    out = walk.value(args if isinstance(args, dict) else {}, "input", 0)
    return out, walk.redacted, list(dict.fromkeys(walk.truncated))


def _size(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "replace"))
    if isinstance(value, dict):
        return sum(_size(v) for v in value.values())
    if isinstance(value, list):
        return sum(_size(v) for v in value)
    return 0


def identity(tool_name: str, tier: str, args: dict[str, Any], kind: str | None) -> tuple[dict[str, Any], list[str]]:
    """(the identity, the redacted paths in it). Raises IdentityTooLarge."""
    walk = _Walk()

    def text(value: Any, where: str) -> str:
        return walk.text(value if isinstance(value, str) else "", f"identity.{where}", bound=False)

    path = args.get("path") if isinstance(args.get("path"), str) else args.get("file_path")
    if kind == "command":
        ident: dict[str, Any] = {"kind": "shell", "command": text(args.get("command"), "command")}
    elif tool_name == "write" or (kind == "path" and isinstance(args.get("content"), str)):
        ident = {"kind": "write", "path": text(path, "path"), "content": text(args.get("content"), "content")}
    elif tool_name == "edit" or (kind == "path" and isinstance(args.get("edits"), list)):
        given = args.get("edits")
        edits: list[Any] = given if isinstance(given, list) else []
        if not edits and isinstance(args.get("oldText"), str):
            edits = [{"oldText": args.get("oldText"), "newText": args.get("newText")}]
        ident = {"kind": "edit", "path": text(path, "path"),
                 "edits": [{"oldText": text(e.get("oldText"), f"edits[{i}].oldText"),
                            "newText": text(e.get("newText"), f"edits[{i}].newText")}
                           for i, e in enumerate(edits) if isinstance(e, dict)]}
    elif kind == "path":
        ident = {"kind": "read" if tier == "read" else "path", "path": text(path, "path")}
    else:
        ident = {"kind": "other"}
    if isinstance(ident.get("path"), str) and len(ident["path"].encode("utf-8", "replace")) > PATH_MAX_BYTES:
        raise IdentityTooLarge(f"the path is longer than {PATH_MAX_BYTES} bytes")
    size = _size(ident)
    if size > IDENTITY_MAX_BYTES:
        raise IdentityTooLarge(f"what it would approve is {size // 1024} KiB, over the {IDENTITY_MAX_BYTES // 1024} "
                               "KiB an approval request can show")
    return ident, walk.redacted
