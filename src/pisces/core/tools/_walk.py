"""Globs, ignore files and a directory walker that behaves like ripgrep's, for when ``rg`` is not installed.

What is emulated (ripgrep 14 with ``--hidden``): ``.gitignore`` (only inside a git repository unless
``require_git=False``), ``.git/info/exclude``, the global git excludes file, ``.ignore`` and ``.rgignore``,
each honoured in the directory holding it and below, deeper files taking precedence, and ancestors of the
search root read too (``.gitignore`` up to the repository root). ``--glob`` overrides beat all of them.
Entries are visited depth-first in byte order of names, which is ripgrep's ``--sort path`` order. Symbolic
links are not followed.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from pisces.core.safe_open import read_text

# ---------------------------------------------------------------------------------------------
# Globs
# ---------------------------------------------------------------------------------------------


def _class_end(pat: str, i: int) -> int:
    """Index of the ``]`` closing the class opened at ``pat[i] == "["``, or -1."""
    j = i + 1
    if j < len(pat) and pat[j] in "!^":
        j += 1
    if j < len(pat) and pat[j] == "]":
        j += 1
    while j < len(pat) and pat[j] != "]":
        if pat[j] == "\\":
            j += 1
        j += 1
    return j if j < len(pat) else -1


def _brace_end(pat: str, i: int) -> int:
    depth = 0
    j = i
    while j < len(pat):
        c = pat[j]
        if c == "\\":
            j += 2
            continue
        if c == "[":
            end = _class_end(pat, j)
            if end != -1:
                j = end + 1
                continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return -1


def _split_alternatives(body: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    cur = []
    j = 0
    while j < len(body):
        c = body[j]
        if c == "\\" and j + 1 < len(body):
            cur.append(body[j:j + 2])
            j += 2
            continue
        if c == "[":
            end = _class_end(body, j)
            if end != -1:
                cur.append(body[j:end + 1])
                j = end + 1
                continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        j += 1
    parts.append("".join(cur))
    return parts


def _lit(ch: str) -> str:
    """``ch`` as a literal in RE2 syntax (inside or outside a class)."""
    if not ch.isascii() or ch.isalnum() or ch == "_":
        return ch
    if ord(ch) < 0x20 or ord(ch) == 0x7F:
        return f"\\x{ord(ch):02x}"
    return "\\" + ch


def glob_to_regex(pat: str) -> str:
    """A regex in RE2 syntax (unanchored text) for a glob where ``*``/``?`` stop at ``/``, ``**`` spans
    directories, ``[...]`` / ``[!...]`` are classes, ``{a,b}`` alternatives and ``\\`` escapes. Meant for
    :class:`Glob` (RE2, linear time): Python's backtracking ``re`` takes exponential time on globs such
    as ``*a*a*a*a*a*a*b``."""
    out: list[str] = []
    i = 0
    n = len(pat)
    while i < n:
        c = pat[i]
        if c == "\\" and i + 1 < n:
            out.append(_lit(pat[i + 1]))
            i += 2
        elif c == "*":
            if i + 1 < n and pat[i + 1] == "*":
                j = i + 2
                while j < n and pat[j] == "*":
                    j += 1
                at_start = i == 0 or pat[i - 1] == "/"
                if at_start and j == n:
                    out.append(".*")
                    i = j
                elif at_start and pat[j] == "/":
                    out.append("(?:.*/)?")
                    i = j + 1
                else:
                    out.append("[^/]*")
                    i = j
            else:
                out.append("[^/]*")
                i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = _class_end(pat, i)
            if end == -1:
                out.append(_lit(c))
                i += 1
                continue
            body = pat[i + 1:end]
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            items: list[str] = []
            k = 0
            while k < len(body):
                ch = body[k]
                if ch == "\\" and k + 1 < len(body):
                    ch = body[k + 1]
                    k += 1
                if k + 2 < len(body) and body[k + 1] == "-":
                    hi = body[k + 2]
                    items.append(f"{_lit(ch)}-{_lit(hi)}")
                    k += 3
                    continue
                items.append(_lit(ch))
                k += 1
            cls = "".join(items)
            out.append(f"[^/{cls}]" if negate else f"[{cls}]" if cls else "[^\\x00-\\x{10FFFF}]")
            i = end + 1
        elif c == "{":
            end = _brace_end(pat, i)
            if end == -1:
                out.append(_lit(c))
                i += 1
                continue
            alts = _split_alternatives(pat[i + 1:end])
            out.append("(?:" + "|".join(glob_to_regex(a) for a in alts) + ")")
            i = end + 1
        else:
            out.append(_lit(c))
            i += 1
    return "".join(out)


class GlobError(ValueError):
    """A glob that cannot be compiled (bad class range, nested too deeply, too large)."""


def _re2_options(ignore_case: bool = False) -> Any:
    import re2  # noqa: PLC0415 - google-re2: imported on the first glob, not at start-up

    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.dot_nl = True
    options.never_capture = True
    options.log_errors = False
    return options


def _encode(text: str) -> bytes:
    # names that are not UTF-8 (surrogate escapes) match as "?" per undecodable byte
    return text.encode("utf-8", "replace")


def _glob_regex(glob: str) -> str:
    try:
        return glob_to_regex(glob)
    except RecursionError:
        raise GlobError("the pattern nests braces too deeply") from None


_GLOB_SPECIALS = frozenset("\\*?[]{}")


def _simple_glob(glob: str) -> tuple[str, str] | None:
    """``(kind, literal)`` for the globs most calls use, a literal with at most one ``*`` at one end
    (``*.py``, ``test_*``, ``Makefile``): kind ``"suffix"``, ``"prefix"`` or ``"exact"``. None otherwise."""
    if glob.startswith("*"):
        kind, literal = "suffix", glob[1:]
    elif glob.endswith("*"):
        kind, literal = "prefix", glob[:-1]
    else:
        kind, literal = "exact", glob
    if not literal or not literal.isascii() or any(c in _GLOB_SPECIALS for c in literal):
        return None
    return kind, literal


class Glob:
    """A glob compiled for RE2, matched against a whole path or name in time linear in its length.

    A glob that is a literal with at most one ``*`` at one end is matched with string methods instead, with
    the same result: RE2's cost per call (encoding the text, crossing into C++) is ten times the match
    itself, and ``find "*.py"`` makes one call per file of the tree."""

    __slots__ = ("_full", "_simple", "_ignore_case")

    def __init__(self, glob: str, *, ignore_case: bool = False) -> None:
        import re2  # noqa: PLC0415 - an optional library, loaded on first use

        try:
            self._full = re2.compile(_encode(_glob_regex(glob)), _re2_options(ignore_case)).fullmatch
        except re2.error as exc:
            raise GlobError(_error_text(exc)) from None
        self._ignore_case = ignore_case
        simple = _simple_glob(glob)
        if simple is not None and ignore_case:
            simple = (simple[0], simple[1].lower())
        self._simple = simple

    @property
    def simple(self) -> tuple[str, str] | None:
        """``(kind, literal)`` when the glob is matched with string methods (the literal lower-cased when
        case is ignored), else None."""
        return self._simple

    @property
    def ignore_case(self) -> bool:
        return self._ignore_case

    def match(self, text: str) -> bool:
        simple = self._simple
        # RE2 folds case by Unicode rules (the Kelvin sign is a "k"): ASCII text only on the fast path
        if simple is None or (self._ignore_case and not text.isascii()):
            return self._full(_encode(text)) is not None
        kind, literal = simple
        if self._ignore_case:
            text = text.lower()
        if kind == "exact":
            return text == literal
        if kind == "suffix":  # "*" stops at "/"
            return text.endswith(literal) and "/" not in text[: len(text) - len(literal)]
        return text.startswith(literal) and "/" not in text[len(literal):]


def _error_text(exc: BaseException) -> str:
    arg = exc.args[0] if exc.args else exc
    return arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)


@dataclass(slots=True)
class Rule:
    regex: str  # RE2 syntax, matched against the whole path relative to the rule's base
    negated: bool
    dir_only: bool
    ignore_case: bool = False


class RuleSet:
    """The rules of one ignore file (or the ``--glob`` overrides), matched all at once: one RE2 set match
    per path, linear in the path's length whatever the patterns are. The last matching rule decides."""

    __slots__ = ("rules", "_set")

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules
        self._set: Any = None

    def __bool__(self) -> bool:
        return bool(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def _compiled(self) -> Any:
        if self._set is None:
            import re2  # noqa: PLC0415 - an optional library, loaded on first use

            matcher = re2.Set.FullMatchSet(_re2_options())
            kept: list[Rule] = []
            for rule in self.rules:
                text = f"(?i:{rule.regex})" if rule.ignore_case else rule.regex
                try:
                    matcher.Add(_encode(text))
                except re2.error:
                    continue  # a rule RE2 cannot compile is dropped, as git drops a bad pattern
                kept.append(rule)
            self.rules = kept
            matcher.Compile()
            self._set = matcher
        return self._set

    def decide(self, rel: str, is_dir: bool) -> bool | None:
        """True = ignored, False = whitelisted (``!``), None = no rule matched."""
        if not self.rules:
            return None
        hits = self._compiled().Match(_encode(rel))
        if not hits:
            return None
        for index in sorted(hits, reverse=True):
            rule = self.rules[index]
            if rule.dir_only and not is_dir:
                continue
            return not rule.negated
        return None


def parse_ignore_pattern(line: str, *, case_insensitive: bool = False) -> Rule | None:
    """One line of a .gitignore (or one ``--glob``, after flipping its ``!``) as a rule matched against
    paths relative to the ignore file's directory."""
    if line.endswith("\r"):
        line = line[:-1]
    if not line or line.startswith("#"):
        return None
    # trailing unescaped spaces are dropped
    stripped = line.rstrip(" ")
    if stripped != line and stripped.endswith("\\"):
        stripped += " "
    line = stripped
    if not line:
        return None
    negated = False
    if line.startswith("!"):
        negated = True
        line = line[1:]
    elif line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    dir_only = False
    if line.endswith("/") and not line.endswith("\\/"):
        dir_only = True
        line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    if line.startswith("/"):
        line = line[1:]
    if not anchored and not line.startswith("**/"):
        line = "**/" + line
    try:
        regex = glob_to_regex(line)
    except RecursionError:
        return None
    return Rule(regex, negated, dir_only, case_insensitive)


IGNORE_FILE_MAX_BYTES = 4 << 20


def read_ignore_file(path: str) -> RuleSet:
    try:
        text = read_text(path, IGNORE_FILE_MAX_BYTES, errors="replace")  # a FIFO or /dev/zero is skipped
    except OSError:
        return RuleSet([])
    if text.startswith("\ufeff"):
        text = text[1:]
    rules = []
    for line in text.split("\n"):
        rule = parse_ignore_pattern(line)
        if rule is not None:
            rules.append(rule)
    return RuleSet(rules)


def global_git_excludes_path() -> str | None:
    """core.excludesFile's default location (``$XDG_CONFIG_HOME/git/ignore``)."""
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    path = os.path.join(xdg, "git", "ignore")
    return path if os.path.isfile(path) else None


# ---------------------------------------------------------------------------------------------
# Overrides (rg --glob)
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class Overrides:
    """``--glob`` patterns, matched against paths relative to ``root`` (ripgrep's working directory).
    Without ``!`` a glob whitelists; with it, it excludes. If any glob whitelists, files matching none are
    excluded."""
    root: str
    rules: RuleSet = field(default_factory=lambda: RuleSet([]))
    has_whitelist: bool = False

    @classmethod
    def build(cls, globs: list[str], root: str) -> "Overrides":
        ov = cls(root)
        rules: list[Rule] = []
        for g in globs:
            # an override glob's "!" means exclude, no "!" means include: the reverse of .gitignore
            rule = parse_ignore_pattern(g[1:] if g.startswith("!") else "!" + g)
            if rule is None:
                continue
            rules.append(rule)
            if rule.negated:
                ov.has_whitelist = True
        ov.rules = RuleSet(rules)
        return ov

    def decide(self, abs_path: str, is_dir: bool) -> bool | None:
        """True = excluded, False = included regardless of ignore files, None = no decision."""
        if not self.rules:
            return None
        rel = os.path.relpath(abs_path, self.root) if _is_under(abs_path, self.root) else abs_path.lstrip("/")
        rel = rel.replace(os.sep, "/")
        m = self.rules.decide(rel, is_dir)
        if m is not None:
            return m
        if self.has_whitelist and not is_dir:
            return True
        return None


def _is_under(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/") or root == "/"


# ---------------------------------------------------------------------------------------------
# Walking
# ---------------------------------------------------------------------------------------------
_NO_RULES = RuleSet([])


@dataclass(slots=True)
class _Level:
    """Ignore rules of one directory."""
    path: str
    custom: RuleSet          # .rgignore
    ignore: RuleSet          # .ignore
    git: RuleSet             # .gitignore
    exclude: RuleSet         # .git/info/exclude (only at a repository root)
    has_git: bool


def _load_level(path: str, names: set[str] | None = None) -> _Level:
    """The ignore files of ``path``; ``names`` (the directory's entries, when already listed) spares the
    lookups of files that are not there."""
    def has(name: str) -> bool:
        return name in names if names is not None else os.path.exists(os.path.join(path, name))

    def rules(name: str) -> RuleSet:
        return read_ignore_file(os.path.join(path, name)) if has(name) else _NO_RULES

    has_git = has(".git")
    git_dir = os.path.join(path, ".git")
    exclude = read_ignore_file(os.path.join(git_dir, "info", "exclude")) if has_git and os.path.isdir(git_dir) \
        else _NO_RULES
    return _Level(path, rules(".rgignore"), rules(".ignore"), rules(".gitignore"), exclude, has_git)


def _rel(path: str, base: str) -> str:
    if base == "/":
        return path.lstrip("/")
    return path[len(base) + 1:] if path.startswith(base + "/") else os.path.relpath(path, base)


class Walker:
    """Yields the files under ``root`` that ripgrep would search, in ``--sort path`` order."""

    def __init__(self, root: str, *, require_git: bool = True, overrides: Overrides | None = None,
                 cancel: threading.Event | None = None) -> None:
        self.root = os.path.abspath(root)
        self.require_git = require_git
        self.overrides = overrides if overrides is not None and overrides.rules else None
        self.cancel = cancel
        self.errors: list[str] = []  # directories that could not be listed, worded as ripgrep words them
        global_path = global_git_excludes_path()
        self.global_rules = read_ignore_file(global_path) if global_path else _NO_RULES
        self.parents: list[_Level] = []  # ancestors of the root, nearest first
        cur = self.root
        while True:
            nxt = os.path.dirname(cur)
            if nxt == cur:
                break
            cur = nxt
            self.parents.append(_load_level(cur))

    def walk(self, include_dirs: bool = False) -> Iterator[tuple[str, bool]]:
        """(absolute path, is_dir) of every entry that is not ignored; the root itself is not yielded."""
        yield from self._walk_dir(self.root, self.parents, include_dirs)

    def _walk_dir(self, path: str, parent_levels: list[_Level], include_dirs: bool
                  ) -> Iterator[tuple[str, bool]]:
        if self.cancel is not None and self.cancel.is_set():
            return
        try:
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            self.errors.append(f"{path}: {exc.strerror or exc} (os error {exc.errno})")
            return
        levels = [_load_level(path, {e.name for e in entries})] + parent_levels
        check = self._checker(levels)
        for entry in entries:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if check is not None and check(entry.path, True):
                    continue
                if include_dirs:
                    yield entry.path, True
                yield from self._walk_dir(entry.path, levels, include_dirs)
            elif stat.S_ISREG(mode):
                if check is not None and check(entry.path, False):
                    continue
                yield entry.path, False

    def _checker(self, levels: list[_Level]) -> Callable[[str, bool], bool] | None:
        """A function (path, is_dir) -> ignored for the entries of one directory; None if nothing can be
        ignored there. ``levels``: that directory's and its ancestors' rules, nearest first."""
        any_git = not self.require_git or any(lv.has_git for lv in levels)
        plain = ([(lv.path, lv.custom) for lv in levels if lv.custom]
                 + [(lv.path, lv.ignore) for lv in levels if lv.ignore])
        git: list[tuple[str, RuleSet]] = []
        repo: str | None = None
        if any_git:
            gi: list[tuple[str, RuleSet]] = []
            ex: list[tuple[str, RuleSet]] = []
            for lv in levels:
                if lv.git:
                    gi.append((lv.path, lv.git))
                if lv.exclude:
                    ex.append((lv.path, lv.exclude))
                if lv.has_git:
                    repo = lv.path
                    break  # no .gitignore above the repository root
            git = gi + ex
            if self.global_rules and (repo is not None or not self.require_git):
                git.append((repo or self.root, self.global_rules))
        overrides = self.overrides
        groups = plain + git
        if overrides is None and not groups:
            return None

        def ignored(path: str, is_dir: bool) -> bool:
            if overrides is not None:
                d = overrides.decide(path, is_dir)
                if d is not None:
                    return d
            for base, rules in groups:
                m = rules.decide(_rel(path, base), is_dir)
                if m is not None:
                    return m
            return False

        return ignored


def path_sort_key(rel: str) -> str:
    """Order of a depth-first walk with names sorted at each level (``a/b`` before ``a.txt``): the path
    with its separators made the lowest character. A trailing ``/`` (a directory) is ignored."""
    return rel.rstrip("/").replace("/", "\x00")


__all__ = ["glob_to_regex", "Glob", "GlobError", "Rule", "RuleSet", "parse_ignore_pattern", "Overrides",
           "Walker", "path_sort_key", "read_ignore_file"]
