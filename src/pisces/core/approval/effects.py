"""Dangerous by effect: what a shell command does, read from its structure (pipelines, simple commands,
redirections, substitutions, ``bash -c`` scripts), not from a list of spellings. No I/O, nothing is run.

``effect(command)`` returns a short description when the command

* **deletes the root, the home directory or a top-level system directory**: ``rm`` with a recursive flag,
  ``find … -delete`` / ``-exec rm``, ``rsync --delete*`` into it, ``mv`` of it, ``shred -r``/``srm``, whatever
  the spelling of the program (``/bin/rm``, ``\\rm``, ``"rm"``, behind ``sudo``/``env``/``xargs``/``nice``/...)
  and of the target (``/``, ``/*``, ``~``, ``~/``, ``~/*``, ``$HOME``, ``${HOME:?}``, ``/home/$USER``,
  ``/usr/..``, ``/{usr,etc}``, ...); also any recursive delete whose program is itself a substitution
  (``$(which rm) -rf ~``);
* **pipes fetched content into an interpreter**: a pipeline with a fetching stage (``curl``, ``wget``,
  ``fetch``, ``aria2c``, ``http``/``https``/``xh``, ``nc``/``ncat``/``socat``, ``Invoke-WebRequest``/``iwr``/
  ``irm``) followed anywhere later by a stage that runs its standard input as a program (any shell,
  ``python*``, ``perl``, ``ruby``, ``node``, ``php``, ``bun``, ``deno``, ``lua``, ``pwsh``, ``iex``,
  ``osascript``, ``source /dev/stdin``, or one of these behind ``xargs``); a shell, ``source``/``.``/``eval``
  or an interpreter given a substitution that fetches (``bash <(curl …)``, ``sh -c "$(wget -O- …)"``); and a
  file a fetcher wrote (``-o F``, ``-O F``, ``> F``) that a later command of the same line runs
  (``sh F``, ``python F``, ``./F``, ``chmod +x F``);
* **writes to a device**: a redirection (``>``, ``>>``, ``&>``, ``>|``), ``tee``, ``dd of=``, ``cp``/``mv``/
  ``install``/``cat``/``pv`` into anything under ``/dev/`` other than ``null``, ``zero``, ``full``,
  ``random``, ``urandom``, ``tty``, ``stdout``, ``stderr``, ``fd/*``, ``shm/*``, ``pts/*``; partitioning or
  formatting tools on ``/dev/`` (``fdisk``, ``sfdisk``, ``parted``, ``sgdisk``, ``mkswap``, ``mkfs*``,
  ``wipefs``, ``blkdiscard``, ``shred``); ``/proc/sysrq-trigger``;
* **destroys git history or work**: ``git push`` with ``--force``/``-f``/``--force-with-lease``/
  ``--mirror``/``--delete``/``-d``, a ``+refspec`` or a ``:ref``; ``reset --hard``; ``clean -f`` with
  ``-d`` or ``-x``; ``branch -D``; ``reflog expire``/``reflog delete``; ``gc --prune=now``; ``filter-branch``;
  ``filter-repo``; ``update-ref -d``; ``stash clear``; git's global options (``-C``, ``-c``, ``--git-dir``)
  are skipped to find the subcommand.

The string literals of an interpreter's ``-c``/``-e``/``-r`` program are read as shell commands too, so
``python3 -c 'os.system("rm -rf ~")'`` is seen.

What it cannot see (only an OS sandbox would confine those; pisces has none yet): the value of a variable
other than ``HOME`` (``rm -rf $DIR``), what a program does inside (``python -c "shutil.rmtree(…)"``, an
argument list such as ``subprocess.run(["rm", "-rf", …])``, a script file, a Makefile target), an alias or
function defined earlier in the same session, a path assembled at run time (``rm -rf "$(echo /)"`` is seen
only through its substitution's text), and content fetched by a program not listed above.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import Iterator

from pisces.core.approval import shell

_HOME = "/__home__"
_TOP_DIRS = frozenset(shell._ROOTISH_DIRS)
_FETCHERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh", "nc", "ncat", "netcat", "socat",
                       "invoke-webrequest", "iwr", "irm", "invoke-restmethod", "lwp-request", "lynx", "links"})
_INTERPRETERS = frozenset({"python", "python2", "python3", "pypy", "pypy3", "node", "nodejs", "perl", "ruby", "php",
                           "bun", "deno", "lua", "luajit", "pwsh", "powershell", "iex", "invoke-expression",
                           "osascript", "tclsh", "wish", "Rscript", "julia", "irb", "jshell"})
_SAFE_DEVICES = frozenset({"null", "zero", "full", "random", "urandom", "tty", "stdout", "stderr", "stdin",
                           "console", "ptmx"})
_SAFE_DEVICE_DIRS = ("fd/", "shm/", "pts/")
_DEVICE_TOOLS = frozenset({"fdisk", "sfdisk", "cfdisk", "parted", "sgdisk", "gdisk", "mkswap", "wipefs",
                           "blkdiscard", "shred", "hdparm", "nvme", "sg_format", "cryptsetup", "mke2fs"})
_GIT_GLOBAL_WITH_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path",
                                    "--super-prefix", "--config-env"})


# ---------------------------------------------------------------------------------------------
# Structure
# ---------------------------------------------------------------------------------------------
def _lists(text: str) -> tuple[list[list[str]], list[str]]:
    """(the pipelines of ``text``, each a list of its stages' texts; the substitutions found)."""
    pipelines: list[list[str]] = []
    nested: list[str] = []
    stages: list[str] = []
    start, i, n = 0, 0, len(text)

    def cut(at: int) -> None:
        piece = text[start:at].strip()
        if piece:
            stages.append(piece)

    while i < n:
        after = shell._skip_quoted(text, i, nested)
        if after < 0:
            after = shell._skip_substitution(text, i, nested, "$<>")
        if after >= 0:
            i = after
            continue
        c = text[i]
        if c == "|" and not text.startswith("||", i) and not (i > 0 and text[i - 1] in "|>"):
            cut(i)
            start = i + 1
            if text.startswith("&", start):  # |& pipes stderr too
                start += 1
                i += 1
        elif c in ";\n\r()" or (c == "&" and not (i > 0 and text[i - 1] in "<>") and not text.startswith(">", i + 1)) \
                or text.startswith("||", i):
            cut(i)
            if stages:
                pipelines.append(stages)
            stages = []
            step = 2 if text.startswith(("||", "&&"), i) else 1
            start = i + step
            i += step
            continue
        i += 1
    cut(n)
    if stages:
        pipelines.append(stages)
    return pipelines, nested


def _tokens(stage: str) -> list[str]:
    """The stage's tokens, quotes removed, redirection operators as tokens of their own."""
    try:
        lex = shlex.shlex(stage, posix=True, punctuation_chars="<>|&;")
        lex.whitespace_split = True
        lex.commenters = ""
        return list(lex)
    except ValueError:
        return stage.split()


def _command(stage: str) -> tuple[list[str], list[str], bool]:
    """(the words of the program and its arguments without wrappers and assignments, the write redirection
    targets, whether ``xargs`` fed it)."""
    toks = _tokens(stage)
    words: list[str] = []
    writes: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t and set(t) <= set("<>|&") and ">" in t:
            if i + 1 < len(toks) and not t.endswith("&"):
                writes.append(toks[i + 1])
            i += 2
            continue
        if t and set(t) <= set("<>|&"):
            i += 2 if t.startswith("<") else 1
            continue
        if t.isdigit() and i + 1 < len(toks) and set(toks[i + 1]) <= set("<>|&") and toks[i + 1]:
            i += 1  # the fd number of 2> / 1>>
            continue
        words.append(t)
        i += 1
    core = shell._strip_prefix(words)
    while core and len(core) < len(words) and core[0].lstrip("-+").isdigit():  # nice -n 5, ionice -c 3
        core = shell._strip_prefix(core[1:])
    fed = any(w.rsplit("/", 1)[-1] == "xargs" for w in words[:len(words) - len(core)])
    return core, writes, fed


def _head(words: list[str]) -> str:
    return words[0].rsplit("/", 1)[-1].lstrip("\\") if words else ""


_QUOTED = re.compile(r"\"([^\"\\]{1,4096})\"|'([^'\\]{1,4096})'")


def _code_strings(words: list[str]) -> list[str]:
    """The string literals of the program given to an interpreter (``python -c``, ``perl -e``, ``node -e``,
    ``ruby -e``, ``php -r``), each read as a shell command: ``os.system("rm -rf ~")`` is seen as
    ``rm -rf ~``. An argument list (``subprocess.run(["rm", "-rf", ...])``) is not."""
    head = _head(words)
    if head not in _INTERPRETERS and head.rstrip("0123456789.") not in _INTERPRETERS:
        return []
    for i, w in enumerate(words[1:-1], start=1):
        if w in shell._CODE_FLAGS or w in ("-r",):
            code = words[i + 1][:65536]
            return [m.group(1) or m.group(2) for m in _QUOTED.finditer(code)][:64]
    return []


def _all_commands(command: str, depth: int = 0) -> Iterator[list[str]]:
    """Every pipeline in ``command``, nested ones (substitutions, ``bash -c`` scripts, ``eval``) included."""
    pipelines, nested = _lists(command)
    for stages in pipelines:
        yield stages
        if depth < shell._MAX_DEPTH:
            for stage in stages:
                words, _, _ = _command(stage)
                for script in shell._inner_scripts(words) + _code_strings(words):
                    yield from _all_commands(script, depth + 1)
    if depth < shell._MAX_DEPTH:
        for text in nested:
            yield from _all_commands(text, depth + 1)


# ---------------------------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------------------------
def _expand_braces(word: str) -> list[str]:
    """One level of ``{a,b}`` expansion (enough to see ``/{usr,etc}``)."""
    start = word.find("{")
    end = word.find("}", start + 1)
    if start < 0 or end < 0 or "," not in word[start:end]:
        return [word]
    return [word[:start] + alt + word[end + 1:] for alt in word[start + 1:end].split(",")][:64]


def _normal(target: str) -> str:
    t = target.strip()
    for home in ("${HOME}", "$HOME", "~"):
        if t == home or t.startswith(home + "/"):
            t = _HOME + t[len(home):]
            break
    if t.startswith("${HOME:") and "}" in t:
        t = _HOME + t[t.index("}") + 1:]
    if t.startswith("~") and "/" not in t:
        t = "/home/" + t[1:]  # ~user
    while t.endswith(("/*", "/.*", "/.[!.]*")):
        t = t.rsplit("/", 1)[0] or "/"
    if t in ("*", ".*"):
        return t
    if t.startswith("/"):
        t = posixpath.normpath(t)
        if t.startswith("//"):
            t = "/" + t.lstrip("/")
    return t


def precious(target: str) -> bool:
    """Whether deleting ``target`` deletes the root, a home directory or a top-level system directory."""
    for word in _expand_braces(target):
        t = _normal(word)
        if t in ("/", _HOME) or (t.startswith("/") and _HOME.startswith(t + "/")):
            return True
        parts = t.strip("/").split("/")
        if t.startswith("/") and len(parts) == 1 and parts[0] in _TOP_DIRS:
            return True
        if t.startswith("/") and len(parts) == 2 and parts[0] in ("home", "Users") and parts[1]:
            return True
        if t.startswith(_HOME + "/..") or t == "$USER":
            return True
    return False


def _device(path: str) -> bool:
    p = posixpath.normpath(path) if path.startswith("/") else path
    if p == "/proc/sysrq-trigger":
        return True
    if not p.startswith("/dev/"):
        return False
    rest = p[len("/dev/"):]
    return bool(rest) and rest not in _SAFE_DEVICES and not rest.startswith(_SAFE_DEVICE_DIRS)


def _flags(args: list[str]) -> tuple[list[str], list[str]]:
    flags, targets, ended = [], [], False
    for a in args:
        if a == "--":
            ended = True
        elif not ended and a.startswith("-") and a != "-":
            flags.append(a)
        else:
            targets.append(a)
    return flags, targets


def _short(flags: list[str], letter: str) -> bool:
    return any(not f.startswith("--") and letter in f[1:] for f in flags)


# ---------------------------------------------------------------------------------------------
# Effects of one simple command
# ---------------------------------------------------------------------------------------------
_HERE = frozenset({"*", ".", "./", "./*", ".*", "./.*", "..", "../*"})


def _deletes(words: list[str], here_precious: bool = False) -> str | None:
    """``here_precious``: an earlier ``cd`` of the same line went to a directory whose deletion counts, so
    ``*`` and ``.`` count too."""
    head = _head(words)
    flags, targets = _flags(words[1:])
    if here_precious:
        targets = ["/" if t in _HERE else t for t in targets]
        words = [words[0], *("/" if w in _HERE else w for w in words[1:])]
    why = "it deletes / or a home or top-level system directory"
    if head == "rm" and ("--recursive" in flags or _short(flags, "r") or _short(flags, "R")):
        return why if any(precious(t) for t in targets) else None
    if head in ("shred", "srm", "wipe") and any(precious(t) for t in targets):
        return why
    if head == "find":
        roots = []
        for a in words[1:]:
            if a.startswith(("-", "(", "!", ")")):
                break
            roots.append(a)
        deleting = "-delete" in words or any(
            w in ("-exec", "-execdir", "-ok", "-okdir") and i + 1 < len(words)
            and _head([words[i + 1]]) in ("rm", "shred", "unlink", "rmdir") for i, w in enumerate(words))
        if deleting and any(precious(r) for r in roots):
            return why
    if head == "rsync" and any(f.startswith("--delete") or f == "--remove-source-files" for f in flags):
        if targets and precious(targets[-1]):
            return why
    if head == "mv" and targets[:-1] and any(precious(t) for t in targets[:-1]):
        return "it moves / or a home or top-level system directory away"
    if (words and ("$(" in words[0] or "`" in words[0] or words[0].startswith("$"))
            and (_short(flags, "r") or _short(flags, "R") or "--recursive" in flags)
            and any(precious(t) for t in targets)):
        return "a program named by a substitution gets a recursive flag and / or the home directory"
    return None


def _device_writes(words: list[str], writes: list[str]) -> str | None:
    why = "it writes to a device"
    if any(_device(w) for w in writes):
        return why
    head = _head(words)
    args = words[1:]
    if head == "dd" and any(a.startswith("of=") and _device(a[3:]) for a in args):
        return why
    if head == "tee" and any(_device(a) for a in args if not a.startswith("-")):
        return why
    flags, targets = _flags(args)
    if head in ("cp", "mv", "install", "rsync", "ln") and targets and _device(targets[-1]):
        return why
    if (head in _DEVICE_TOOLS or head.startswith("mkfs")) and any(_device(t) for t in targets + flags):
        return "it partitions, formats or wipes a device"
    return None


def _git(words: list[str]) -> str | None:
    if _head(words) != "git":
        return None
    i = 1
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in _GIT_GLOBAL_WITH_VALUE else 1
    if i >= len(words):
        return None
    sub, args = words[i], words[i + 1:]
    flags, targets = _flags(args)
    why = f"git {sub} destroys history or uncommitted work"
    if sub == "push":
        if any(f in ("--force", "--mirror", "--delete", "--prune") or f.startswith("--force-with-lease")
               or f.startswith("--force-if-includes") for f in flags) or _short(flags, "f") or _short(flags, "d"):
            return why
        if any(t.startswith("+") or (t.startswith(":") and len(t) > 1) for t in targets[1:]):
            return why
    if sub == "reset" and "--hard" in flags:
        return why
    if sub == "clean" and (_short(flags, "f") or "--force" in flags) and (
            _short(flags, "d") or _short(flags, "x") or _short(flags, "X")):
        return why
    if sub == "branch" and (_short(flags, "D") or ("--delete" in flags and "--force" in flags)):
        return why
    if sub == "reflog" and targets[:1] in (["expire"], ["delete"]):
        return why
    if sub == "gc" and any(f.startswith("--prune=") and f != "--prune=2.weeks.ago" for f in flags):
        return why
    if sub in ("filter-branch", "filter-repo"):
        return why
    if sub == "update-ref" and "-d" in flags:
        return why
    if sub == "stash" and targets[:1] == ["clear"]:
        return why
    return None


def _runs_stdin(words: list[str], fed: bool) -> bool:
    """Whether this stage runs its standard input (or what xargs builds from it) as a program."""
    head = _head(words)
    base = head.rstrip("0123456789.")
    if head in ("source", ".") and words[1:2] in (["/dev/stdin"], ["-"]):
        return True
    if head == "eval" and fed:
        return True
    if head not in shell._SHELLS and head not in _INTERPRETERS and base not in _INTERPRETERS and \
            head.lower() not in _INTERPRETERS:
        return False
    if fed:
        return True
    flags, targets = _flags(words[1:])
    if head in ("deno", "bun") and targets[:1] == ["run"]:
        targets = targets[1:]
    if head in shell._SHELLS and ("-s" in flags or _short(flags, "s")):
        return True
    if any(f in shell._CODE_FLAGS or f in ("-m",) for f in flags) or (
            head in shell._SHELLS and _short(flags, "c")):
        return False  # the program comes from an argument
    return not targets or targets[0] in ("-", "/dev/stdin")


def _fetches(words: list[str]) -> bool:
    return _head(words).lower() in _FETCHERS


def _fetch_outputs(words: list[str], writes: list[str]) -> list[str]:
    out = list(writes)
    for i, w in enumerate(words[:-1]):
        if w in ("-o", "-O", "--output", "--output-document", "-OutFile", "-outfile"):
            out.append(words[i + 1])
    for w in words:
        for opt in ("--output=", "--output-document=", "-o", "-O"):
            if w.startswith(opt) and len(w) > len(opt) and opt.endswith("="):
                out.append(w[len(opt):])
    return [posixpath.normpath(o) for o in out if o not in ("-", "/dev/stdout")]


def _runs_file(words: list[str], files: set[str]) -> bool:
    if not words or not files:
        return False
    head = words[0]
    if posixpath.normpath(head) in files or posixpath.normpath(head.lstrip("./")) in files:
        return True
    name = _head(words)
    base = name.rstrip("0123456789.")
    if name in shell._SHELLS or name in _INTERPRETERS or base in _INTERPRETERS or name in ("source", ".", "chmod"):
        return any(posixpath.normpath(a) in files for a in words[1:] if not a.startswith("-"))
    return False


def _fetch_into_interpreter(pipelines: list[list[str]]) -> str | None:
    why = "it runs downloaded content"
    fetched_files: set[str] = set()
    for stages in pipelines:
        fetched = False
        for stage in stages:
            words, writes, fed = _command(stage)
            if fetched and _runs_stdin(words, fed):
                return why
            if _runs_file(words, fetched_files):
                return why
            if _fetches(words):
                fetched = True
                fetched_files.update(_fetch_outputs(words, writes))
            _, nested = _lists(stage)
            head = _head(words)
            if nested and any(_fetch_anywhere(t) for t in nested) and (
                    head in shell._SHELLS or head in ("source", ".", "eval") or head in _INTERPRETERS
                    or head.rstrip("0123456789.") in _INTERPRETERS):
                return why
    return None


def _fetch_anywhere(text: str) -> bool:
    return any(_fetches(_command(stage)[0]) for stages in _all_commands(text) for stage in stages)


# ---------------------------------------------------------------------------------------------
def effect(command: str) -> str | None:
    """Why ``command`` is dangerous by what it does, or None (see the module's docstring)."""
    everything = list(_all_commands(command))
    here = False  # whether a cd earlier on the line went to /, home or a top-level system directory
    for stages in everything:
        for stage in stages:
            words, writes, _ = _command(stage)
            if _head(words) in ("cd", "pushd", "chdir"):
                args = [w for w in words[1:] if not w.startswith("-")]
                here = not args or precious(args[0])
                continue
            why = _deletes(words, here) or _device_writes(words, writes) or _git(words)
            if why is not None:
                return why
    # each level (the top and every nested script) as a sequence of pipelines, for downloads that get run
    levels = [command]
    for stages in everything:
        for stage in stages:
            words, _, _ = _command(stage)
            levels.extend(shell._inner_scripts(words))
            levels.extend(_lists(stage)[1])
    for text in levels[:256]:
        why = _fetch_into_interpreter(_lists(text)[0])
        if why is not None:
            return why
    return None
