"""Finding and loading extensions.

Load order, which is also handler order (pi's, in Python terms):

1. ``-e/--extension PATH`` (scope "temporary", source "cli");
2. settings ``packages`` (importable module names) and ``extensions`` (paths), project before global;
3. ``<project>/.pisces/extensions/`` then ``~/.pisces/agent/extensions/``: ``*.py`` files and package
   directories (``<dir>/__init__.py``), one level deep;
4. seed 003's older forms: hooks (settings ``hooks``, ``.pisces/hooks/``, ``~/.pisces/agent/hooks/``) and custom
   tools (settings ``customTools``, ``.pisces/tools/``, ``~/.pisces/agent/tools/``);
5. installed distributions that declare an entry point in the group ``pisces.extensions``;
6. inline ``register`` functions given to ``create_agent_session(extensions=[...])``.

Project sources (project settings entries and the project's directories) load only in a trusted project.
``--no-extensions`` keeps only 1 and 6; ``PISCES_DISABLE_EXTENSION_AUTOLOAD=1`` skips 5. A path seen twice
loads once. A module loads as ``register(pi)`` (or ``extension``/``default``), sync or async.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from typing import Any, Callable

from pisces.core.config.trust import is_project_trusted
from pisces.core.extensions.api import Extension, ExtensionAPI, Runtime
from pisces.core.extensions.entry_points import entry_points
from pisces.core.extensions.legacy import custom_tool_register

ENTRY_POINT_GROUP = "pisces.extensions"
AUTOLOAD_ENV = "PISCES_DISABLE_EXTENSION_AUTOLOAD"
ENTRY_NAMES = ("register", "extension", "default", "hook", "tool")


class Source:
    """One extension to load: a file or package path, an importable module, or a function."""

    def __init__(self, path: str, *, kind: str = "extension", source: str = "local", scope: str = "user",
                 origin: str = "top-level", module: str | None = None, attr: str | None = None,
                 factory: Callable[..., Any] | None = None) -> None:
        self.path = path
        self.kind = kind
        self.module = module  # an importable module name (settings packages, entry points)
        self.attr = attr  # the entry point's attribute, else register/extension/default
        self.factory = factory  # an inline register function
        self.source_info = {"path": path, "source": source, "scope": scope, "origin": origin}


def is_trusted(cwd: str, agent_dir: str) -> bool:
    """pisces.core.config.trust's answer (--approve, trust.json, defaultProjectTrust)."""

    try:
        return bool(is_project_trusted(cwd, agent_dir))
    except Exception:  # noqa: BLE001 - a broken trust store trusts nothing
        return False


def _expand(path: str, base: str) -> str:
    path = os.path.expanduser(path)
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(base, path))


def scan_dir(directory: str) -> list[str]:
    """``*.py`` files and package directories directly in ``directory``, sorted by name."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    found = []
    for name in names:
        if name.startswith((".", "_")):
            continue
        full = os.path.join(directory, name)
        if name.endswith(".py") and os.path.isfile(full):
            found.append(full)
        elif os.path.isfile(os.path.join(full, "__init__.py")):
            found.append(full)
    return found


def _settings_list(data: dict[str, Any], key: str) -> list[str]:
    value = data.get(key)
    return [v for v in value if isinstance(v, str) and v.strip()] if isinstance(value, list) else []


def discover(cwd: str, agent_dir: str, *, global_settings: dict[str, Any], project_settings: dict[str, Any],
             cli_paths: list[str] | None = None, no_extensions: bool = False,
             inline: list[Callable[..., Any]] | None = None) -> tuple[list[Source], list[str]]:
    """The sources in load order, and notes for the user (an untrusted project's extensions, ...)."""
    notes: list[str] = []
    sources: list[Source] = [Source(_expand(p, cwd), source="cli", scope="temporary") for p in cli_paths or []]
    if not no_extensions:
        project_dir = os.path.join(cwd, ".pisces")
        trusted = None

        def project_allowed(what: str) -> bool:
            nonlocal trusted
            if trusted is None:
                trusted = is_trusted(cwd, agent_dir)
            if not trusted:
                notes.append(f"{what} of this project not loaded: the project is not trusted")
            return trusted

        scopes = [("project", project_settings, project_dir), ("user", global_settings, agent_dir)]
        for scope, data, base in scopes:
            entries = _settings_list(data, "packages") + _settings_list(data, "extensions")
            if entries and (scope == "user" or project_allowed("settings 'packages'/'extensions'")):
                for name in _settings_list(data, "packages"):
                    sources.append(Source(f"package:{name}", source=name, scope=scope, origin="package",
                                          module=name))
                for path in _settings_list(data, "extensions"):
                    full = _expand(path, base)
                    sources.extend(Source(p, scope=scope) for p in (scan_dir(full) if _is_plain_dir(full)
                                                                    else [full]))
        for scope, base in (("project", project_dir), ("user", agent_dir)):
            found = scan_dir(os.path.join(base, "extensions"))
            if found and (scope == "user" or project_allowed("extensions")):
                sources.extend(Source(p, scope=scope) for p in found)
        for kind, key, sub in (("hook", "hooks", "hooks"), ("tool", "customTools", "tools")):
            for scope, data, base in scopes:
                paths = [_expand(p, base) for p in _settings_list(data, key)] + scan_dir(os.path.join(base, sub))
                if paths and (scope == "user" or project_allowed(sub)):
                    sources.extend(Source(p, kind=kind, scope=scope) for p in paths)
        if os.environ.get(AUTOLOAD_ENV, "") in ("", "0"):
            for name, value, dist in entry_points(ENTRY_POINT_GROUP, agent_dir):
                module, _, attr = value.partition(":")
                sources.append(Source(f"entry-point:{name}", source=dist or name, scope="user", origin="package",
                                      module=module.strip(), attr=attr.strip() or None))
    for i, fn in enumerate(inline or []):
        sources.append(Source(f"<inline:{getattr(fn, '__name__', i)}>", source="sdk", scope="temporary",
                              factory=fn))
    seen: set[str] = set()
    unique = []
    for s in sources:
        key = s.module or (os.path.realpath(s.path) if s.factory is None else str(id(s.factory)))
        if key not in seen:
            seen.add(key)
            unique.append(s)
    return unique, notes


def _is_plain_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.isfile(os.path.join(path, "__init__.py"))


def import_source(source: Source) -> Callable[..., Any]:
    """The register function of ``source`` (imported fresh: a reload sees the file as it is now)."""
    if source.factory is not None:
        return source.factory
    if source.module is not None:
        scheme = source.module.split(":", 1)[0] if ":" in source.module else ""
        if scheme in ("npm", "git", "github", "http", "https", "file") or "/" in source.module:
            raise ImportError(f"package {source.module!r}: pi's npm:/git: package sources are not installed by pisces."
                              " A pisces extension package is a Python package: install it (pip install ...) and "
                              "list its import name under 'packages', or list a file or directory under "
                              "'extensions'")
        module = importlib.import_module(source.module)
        if source.attr:
            obj: Any = module
            for part in source.attr.split("."):
                obj = getattr(obj, part)
            return obj
        return _entry(module, source.path)
    path = source.path
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file or directory: {path}")
    is_pkg = os.path.isdir(path)
    init = os.path.join(path, "__init__.py") if is_pkg else path
    if is_pkg and not os.path.isfile(init):
        raise ImportError(f"{path} is a directory without __init__.py")

    name = "pisces_ext_" + hashlib.sha1(os.path.realpath(path).encode()).hexdigest()[:12]
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[path] if is_pkg
                                                  else None)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return _entry(module, path)


def _entry(module: Any, path: str) -> Callable[..., Any]:
    for name in ENTRY_NAMES:
        fn = getattr(module, name, None)
        if callable(fn):
            return fn
    raise ImportError(f"Extension does not export a register(pi) function: {path}")


async def load_all(sources: list[Source], runtime: Runtime) -> tuple[list[Extension], list[tuple[Source, str]]]:
    """Import each source and call (and await) its register function, in order. Returns the extensions that
    loaded and (source, error text) for each one that failed to import or register."""
    extensions: list[Extension] = []
    failures: list[tuple[Source, str]] = []
    for source in sources:
        ext = Extension(source.path, source.source_info, source.kind)
        try:
            factory = import_source(source)
            if source.kind == "tool":
                factory = custom_tool_register(factory)
            result = factory(ExtensionAPI(ext, runtime))
            if inspect.isawaitable(result):
                await result
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - one broken extension must not stop the others
            failures.append((source, _describe(exc)))
            continue
        extensions.append(ext)
    return extensions, failures


def run_now(coro: Any) -> Any:
    """Run a coroutine to its end from synchronous code: with ``asyncio.run`` when no loop runs, else by
    driving it by hand, which works as long as it never has to wait (sync register functions)."""

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("an async register() function must be loaded with create_agent_session_async() "
                       "when an event loop is already running")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
