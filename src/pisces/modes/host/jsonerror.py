"""Describe why a line is not valid JSON, in the words Node's ``JSON.parse`` uses.

pi answers a malformed line with ``Failed to parse command: <JSON.parse message>``. Clients may match on
that text, so the messages follow V8's templates. This scanner runs only after a fast parse has failed.
"""

from __future__ import annotations

_WS = " \t\n\r"
_CONTEXT = 10  # characters of context V8 shows on each side of the bad token


class _Fail(Exception):
    def __init__(self, message: str) -> None:
        self.message = message


def _unexpected_token(src: str, pos: int) -> _Fail:
    ch = src[pos]
    if len(src) < 2 * _CONTEXT + 1:
        return _Fail(f"Unexpected token '{ch}', \"{src}\" is not valid JSON")
    if pos < _CONTEXT:
        return _Fail(f"Unexpected token '{ch}', \"{src[:pos + _CONTEXT]}\"... is not valid JSON")
    if pos >= len(src) - _CONTEXT:
        return _Fail(f"Unexpected token '{ch}', ...\"{src[pos - _CONTEXT:]}\" is not valid JSON")
    return _Fail(f"Unexpected token '{ch}', ...\"{src[pos - _CONTEXT:pos + _CONTEXT]}\"... is not valid JSON")


class _Scanner:
    def __init__(self, src: str) -> None:
        self.s = src
        self.n = len(src)

    def ws(self, i: int) -> int:
        while i < self.n and self.s[i] in _WS:
            i += 1
        return i

    def eof(self, i: int, template: str | None = None) -> _Fail:
        if template:
            return _Fail(f"{template} in JSON at position {i}")
        return _Fail("Unexpected end of JSON input")

    def value(self, i: int) -> int:
        i = self.ws(i)
        if i >= self.n:
            raise self.eof(i)
        c = self.s[i]
        if c == "{":
            return self.obj(i + 1)
        if c == "[":
            return self.arr(i + 1)
        if c == '"':
            return self.string(i + 1)
        if c == "-" or c.isdigit():
            return self.number(i)
        for word in ("true", "false", "null"):
            if self.s.startswith(word, i):
                return i + len(word)
            if word.startswith(self.s[i:]) and self.s[i:]:
                raise self.eof(self.n)
        if c in "tfn":
            word = {"t": "true", "f": "false", "n": "null"}[c]
            j = i
            while j < self.n and j - i < len(word) and self.s[j] == word[j - i]:
                j += 1
            raise _unexpected_token(self.s, j)
        raise _unexpected_token(self.s, i)

    def obj(self, i: int) -> int:
        i = self.ws(i)
        if i < self.n and self.s[i] == "}":
            return i + 1
        while True:
            i = self.ws(i)
            if i >= self.n or self.s[i] != '"':
                if i >= self.n:
                    raise self.eof(i, "Expected property name or '}'")
                raise _Fail(f"Expected property name or '}}' in JSON at position {i}")
            i = self.string(i + 1)
            i = self.ws(i)
            if i >= self.n or self.s[i] != ":":
                raise _Fail(f"Expected ':' after property name in JSON at position {i}")
            i = self.value(i + 1)
            i = self.ws(i)
            if i < self.n and self.s[i] == ",":
                i += 1
                continue
            if i < self.n and self.s[i] == "}":
                return i + 1
            raise _Fail(f"Expected ',' or '}}' after property value in JSON at position {i}")

    def arr(self, i: int) -> int:
        i = self.ws(i)
        if i < self.n and self.s[i] == "]":
            return i + 1
        while True:
            i = self.value(i)
            i = self.ws(i)
            if i < self.n and self.s[i] == ",":
                i += 1
                continue
            if i < self.n and self.s[i] == "]":
                return i + 1
            raise _Fail(f"Expected ',' or ']' after array element in JSON at position {i}")

    def string(self, i: int) -> int:
        while i < self.n:
            c = self.s[i]
            if c == '"':
                return i + 1
            if c == "\\":
                if i + 1 >= self.n:
                    break
                e = self.s[i + 1]
                if e == "u":
                    hexpart = self.s[i + 2:i + 6]
                    if len(hexpart) < 4 or any(h not in "0123456789abcdefABCDEF" for h in hexpart):
                        raise _Fail(f"Bad Unicode escape in JSON at position {i}")
                    i += 6
                    continue
                if e not in '"\\/bfnrt':
                    raise _Fail(f"Bad escaped character in JSON at position {i + 1}")
                i += 2
                continue
            if ord(c) < 0x20:
                raise _Fail(f"Bad control character in string literal in JSON at position {i}")
            i += 1
        raise _Fail(f"Unterminated string in JSON at position {self.n}")

    def number(self, i: int) -> int:
        start = i
        if self.s[i] == "-":
            i += 1
            if i >= self.n or not self.s[i].isdigit():
                raise _Fail(f"No number after minus sign in JSON at position {i}")
        if self.s[i] == "0":
            i += 1
        else:
            while i < self.n and self.s[i].isdigit():
                i += 1
        if i < self.n and self.s[i] == ".":
            i += 1
            if i >= self.n or not self.s[i].isdigit():
                raise _Fail(f"Unterminated fractional number in JSON at position {i}")
            while i < self.n and self.s[i].isdigit():
                i += 1
        if i < self.n and self.s[i] in "eE":
            i += 1
            if i < self.n and self.s[i] in "+-":
                i += 1
            if i >= self.n or not self.s[i].isdigit():
                raise _Fail(f"Exponent part is missing a number in JSON at position {i}")
            while i < self.n and self.s[i].isdigit():
                i += 1
        _ = start
        return i


def describe_json_error(text: str) -> str:
    """The ``JSON.parse`` error message for ``text`` (which is expected to be invalid)."""
    sc = _Scanner(text)
    try:
        end = sc.value(0)
        end = sc.ws(end)
        if end < sc.n:
            return f"Unexpected non-whitespace character after JSON at position {end}"
        return "Invalid JSON"
    except _Fail as f:
        return f.message
    except RecursionError:
        return "Maximum call stack size exceeded"
