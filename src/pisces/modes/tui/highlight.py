"""Code lines inside a fenced block coloured by Pygments (loaded on the first fence). Each line is coloured
on its own, as it is committed (a string spanning lines may be coloured as code on its later lines). The
input is already cleaned; only SGR colours are added."""

from __future__ import annotations

from typing import Any

from pisces.modes.tui.render import PALETTE, RESET

_LEXERS: dict[str, Any] = {}

_COLOURS = (  # token type name prefix -> SGR
    ("Keyword", "35"), ("Name.Builtin", "36"), ("Name.Function", "34"), ("Name.Class", "1;34"),
    ("Name.Decorator", "36"), ("Literal.String", "32"), ("Literal.Number", "33"), ("Comment", "2;3"),
    ("Operator.Word", "35"), ("Name.Tag", "31"), ("Name.Attribute", "33"),
)
_ROLES = (  # token type name prefix -> the theme's colour for it (theme.SYNTAX)
    ("Keyword", "syntaxKeyword"), ("Name.Function", "syntaxFunction"), ("Name.Class", "syntaxType"),
    ("Name.Builtin", "syntaxType"), ("Literal.String", "syntaxString"), ("Literal.Number", "syntaxNumber"),
    ("Comment", "syntaxComment"), ("Operator", "syntaxOperator"), ("Name.Variable", "syntaxVariable"),
    ("Punctuation", "syntaxPunctuation"),
)


def lexer_for(lang: str) -> Any:
    lang = lang.strip().lower()
    if not lang:
        return None
    if lang not in _LEXERS:
        try:
            from pygments.lexers import get_lexer_by_name  # noqa: PLC0415 - the first code fence
            from pygments.util import ClassNotFound  # noqa: PLC0415 - the first code fence

            try:
                _LEXERS[lang] = get_lexer_by_name(lang, stripnl=False, ensurenl=False)
            except ClassNotFound:
                _LEXERS[lang] = None
        except ImportError:
            _LEXERS[lang] = None
    return _LEXERS[lang]


def highlight(line: str, lexer: Any) -> str:
    if lexer is None or not line:
        return f"\x1b[33m{line}{RESET}" if line else line
    out = []
    for ttype, value in lexer.get_tokens(line):
        name = str(ttype).removeprefix("Token.")
        code = next((c for prefix, c in _COLOURS if name.startswith(prefix)), None)
        if PALETTE:
            role = next((r for prefix, r in _ROLES if name.startswith(prefix)), None)
            code = PALETTE.get(role, code) if role else code
        out.append(f"\x1b[{code}m{value}{RESET}" if code and value.strip() else value)
    return "".join(out).rstrip("\n")
