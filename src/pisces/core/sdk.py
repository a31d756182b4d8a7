"""Build an AgentSession: from CLI flags (``create_session_from_args``) or from Python (``create_agent_session``).

    from pisces.core.sdk import create_agent_session
    session = create_agent_session(cwd=".", provider="faux", no_session=True)
    await session.prompt("hello")
    print(session.last_assistant_text())
"""

from __future__ import annotations

import os
import sys
from typing import Any

from pisces.ai.models import clamp_thinking_level
from pisces.core.models_registry import ModelRegistry
from pisces.core.paths import agent_dir
from pisces.core.session import AgentSession
from pisces.core.settings import Settings
from pisces.core.store import SessionFileError, SessionManager, find_sessions_by_id, resolve_session_dir
from pisces.core.task import register_task_tool


class SessionConfigError(ValueError):
    """The flags or configuration cannot make a session; the text says what to change."""


def _session_path(arg: str) -> str:
    """A session file from a path or (a prefix of) a session id."""
    path = os.path.expanduser(arg)
    if os.path.sep in arg or arg.endswith(".jsonl"):
        return path
    matches = find_sessions_by_id(arg, None)
    if not matches:
        raise SessionConfigError(f"No session matches '{arg}': give a session file or the start of a session id "
                                 "(list_sessions shows them)")
    if len(matches) > 1:
        raise SessionConfigError(f"'{arg}' matches {len(matches)} sessions: give more of the id")
    return matches[0].path


def _open_store(cwd: str, settings: Settings, *, no_session: bool, session_dir: str | None, session: str | None,
                continue_session: bool, fork: str | None = None) -> SessionManager:
    if no_session:
        return SessionManager.in_memory(cwd)
    directory = resolve_session_dir(cwd, session_dir, settings.session_dir)
    if fork:
        source = _session_path(fork)
        if not os.path.isfile(source):
            raise SessionConfigError(f"Cannot fork {source}: no such session file")
        try:
            return SessionManager.fork_from(source, cwd, directory)
        except (OSError, ValueError) as exc:
            raise SessionConfigError(f"Cannot fork {source}: {exc}") from None
    if session:
        try:
            return SessionManager.open(_session_path(session), session_dir)
        except SessionFileError as exc:
            raise SessionConfigError(str(exc)) from None
    if continue_session:
        return SessionManager.continue_recent(cwd, directory)
    return SessionManager.create(cwd, directory)


def create_agent_session(*, cwd: str | None = None, provider: str | None = None, model: str | None = None,
                         models: str | None = None, api_key: str | None = None, thinking: str | None = None,
                         no_session: bool = False, session_dir: str | None = None, session: str | None = None,
                         continue_session: bool = False, tools: list[str] | None = None,
                         system_prompt: str | None = None, append_system_prompt: str | None = None,
                         context_files: bool = True, faux_script: str | None = None,
                         backends: Any = None, fork: str | None = None) -> AgentSession:
    from pisces.core.resources import build_system_prompt
    from pisces.core.tools import DEFAULT_TOOL_NAMES, create_tools

    cwd = os.path.abspath(cwd or os.getcwd())
    adir = agent_dir()
    settings = Settings(adir, cwd)
    if settings.ignored_project_settings:
        from pisces.core.trust import untrusted_notice

        sys.stderr.write(untrusted_notice(settings.project_path, settings.ignored_project_settings) + "\n")
    use_faux = provider == "faux" or bool(faux_script)
    if use_faux:
        from pisces.ai.providers import faux

        if faux_script and faux.SCRIPT.source != faux_script:  # once per process, however many sessions
            try:
                faux.SCRIPT.load_file(faux_script)
            except ValueError as exc:
                raise SessionConfigError(str(exc)) from None
        elif not faux_script and faux.SCRIPT.default is None and not faux.SCRIPT.queue:
            faux.use_demo()
    registry = ModelRegistry(adir, api_key_override=api_key, override_provider=provider, enable_faux=use_faux)
    if registry.load_error:
        sys.stderr.write(f"pisces: {registry.load_error}\n")
    scope = [p.strip() for p in models.split(",") if p.strip()] if models else None
    try:
        chosen, cli_level = registry.select_initial_model(settings, cli_provider=provider, cli_model=model,
                                                          scope=scope, is_continuing=bool(session or continue_session))
    except ValueError as exc:
        raise SessionConfigError(str(exc)) from None
    for warning in registry.warnings:  # after the choice, which may add some
        sys.stderr.write(f"pisces: {warning}\n")
    if api_key and not (provider or model) and chosen is None:
        raise SessionConfigError("--api-key was given but no model is selected to use it with: add --provider "
                                 "<name> (anthropic, openai, google, ...) or --model <provider/id>")
    if (provider or model) and chosen is None:
        raise SessionConfigError(f"No model found for --provider {provider or '-'} --model {model or '-'}")
    store = _open_store(cwd, settings, no_session=no_session, session_dir=session_dir, session=session,
                        continue_session=continue_session, fork=fork)
    level = thinking or cli_level or settings.default_thinking_level or "medium"
    if chosen is not None:
        level = clamp_thinking_level(chosen, level)
    else:
        level = "off"
    all_tools = create_tools(cwd, shell_path=settings.shell_path, command_prefix=settings.shell_command_prefix,
                             backends=backends)
    built: list[AgentSession] = []
    register_task_tool(all_tools, lambda: built[0], adir, backends)  # not active by default: --tools ...,task
    if tools is None:
        active = list(DEFAULT_TOOL_NAMES)
    else:
        unknown = [t for t in tools if t not in all_tools]
        if unknown:
            raise SessionConfigError(f"Unknown tool(s): {', '.join(unknown)}. Available: {', '.join(all_tools)}")
        active = list(tools)

    def prompt_for(active_tools: list[Any]) -> str:
        return build_system_prompt(cwd, tools=[(t.name, t.description.split("\n", 1)[0]) for t in active_tools],
                                   agent_dir=adir, custom_prompt=system_prompt, append=append_system_prompt,
                                   context_files=context_files)

    sess = AgentSession(cwd=cwd, settings=settings, registry=registry, store=store, model=chosen,
                        thinking_level=level, tools=all_tools, active_tools=active, system_prompt_builder=prompt_for)
    sess.scope_patterns = scope
    built.append(sess)
    if _has_budget_settings(settings):  # otherwise nothing of pisces.core.budget is even imported
        from pisces.core.budget import attach_from_settings

        attach_from_settings(sess)
    return sess


def _has_budget_settings(settings: Settings) -> bool:
    """Whether a settings file has ``task.budget`` (nested) or a flat ``task.budget.*`` key."""
    for data in (settings.global_settings(), settings.project_settings()):
        task = data.get("task")
        if isinstance(task, dict) and isinstance(task.get("budget"), dict):
            return True
        if any(key.startswith("task.budget.") for key in data):
            return True
    return False


def create_session_from_args(args: Any, **overrides: Any) -> AgentSession:
    """A session from the CLI flags; ``overrides`` (``cwd``, ``session``, ``backends``, ...) win over them."""
    tools: list[str] | None = None
    if getattr(args, "tools", None):
        tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    elif getattr(args, "no_tools", False) or getattr(args, "no_builtin_tools", False):
        tools = []  # pisces has only built-in tools so far
    append = getattr(args, "append_system_prompt", None)
    if isinstance(append, list):  # repeatable: each is text or a file, joined as pi joins them
        from pisces.core.resources import resolve_prompt_input

        parts = [resolve_prompt_input(a) for a in append]
        append = "\n\n".join(p for p in parts if p) or None
    options: dict[str, Any] = dict(
        provider=args.provider, model=args.model, models=getattr(args, "models", None), api_key=args.api_key,
        thinking=args.thinking, no_session=args.no_session, session_dir=args.session_dir,
        session=getattr(args, "session", None), continue_session=getattr(args, "continue_session", False),
        tools=tools, system_prompt=getattr(args, "system_prompt", None),
        append_system_prompt=append, fork=getattr(args, "fork", None),
        context_files=not getattr(args, "no_context_files", False), faux_script=getattr(args, "faux_script", None))
    options.update(overrides)
    return create_agent_session(**options)
