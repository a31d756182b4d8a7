"""Build an AgentSession: from CLI flags (``create_session_from_args``) or from Python (``create_agent_session``).

    from pisces.core.session.build import create_agent_session
    session = create_agent_session(cwd=".", provider="faux", no_session=True)
    await session.prompt("hello")
    print(session.last_assistant_text())
"""

from __future__ import annotations

import os
import sys
from typing import Any

from pisces.ai.models import clamp_thinking_level
from pisces.ai.providers import faux
from pisces.core.approval import MODES as APPROVAL_MODES
from pisces.core.approval import attach as attach_approval
from pisces.core.config.models_registry import ModelRegistry
from pisces.core.config.paths import agent_dir
from pisces.core.config.settings import Settings
from pisces.core.config.trust import untrusted_notice
from pisces.core.errors import SessionConfigError, UsageError
from pisces.core.extensions.sources import extension_sources_present
from pisces.core.planning.session_todos import attach as attach_todos
from pisces.core.planning.session_todos import todos_enabled
from pisces.core.planning.todo_tool import TodoWriteTool
from pisces.core.planning.ttsr import attach as attach_stream_rules
from pisces.core.resources.system_prompt import build_system_prompt, default_guidelines, resolve_prompt_input
from pisces.core.sandbox.launch import Sandbox
from pisces.core.session.agent_session import AgentSession
from pisces.core.store import SessionFileError, SessionManager, find_sessions_by_id, resolve_session_dir
from pisces.core.task import register_task_tool
from pisces.core.tools import DEFAULT_TOOL_NAMES, create_tools


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


class _Plan:
    """What ``create_agent_session`` decided before the extensions load (they may add providers).

    ``_begin`` fills it with its own parameters (the attributes below from ``provider`` on) and what it works
    out (``cwd``, ``adir``, ``settings``, ``ext_options``); ``loaded`` is set once the extensions are loaded.
    """

    cwd: str
    adir: str
    settings: Settings
    ext_options: dict[str, Any]
    loaded: Any  # the ExtensionHost's load result (pisces.core.extensions.binding.load_extensions), or None
    provider: str | None
    model: str | None
    models: str | None
    api_key: str | None
    thinking: str | None
    no_session: bool
    session_dir: str | None
    session: str | None
    continue_session: bool
    tools: list[str] | None
    system_prompt: str | None
    append_system_prompt: str | None
    context_files: bool
    faux_script: str | None
    extensions: list[Any] | None
    extension_paths: list[str] | None
    no_extensions: bool
    extension_flags: list[str] | None
    skill_paths: list[str] | None
    no_skills: bool
    prompt_template_paths: list[str] | None
    no_prompt_templates: bool
    backends: Any
    fork: str | None
    approval_mode: str | None
    mcp_servers: dict[str, Any] | None  # MCP servers a front end gave (ACP's session/new), besides mcp.json
    sandbox_mode: str | None  # --sandbox (docs/security.md)


def _begin(*, cwd: str | None = None, provider: str | None = None, model: str | None = None,
           models: str | None = None, api_key: str | None = None, thinking: str | None = None,
           no_session: bool = False, session_dir: str | None = None, session: str | None = None,
           continue_session: bool = False, tools: list[str] | None = None,
           system_prompt: str | None = None, append_system_prompt: str | None = None,
           context_files: bool = True, faux_script: str | None = None,
           extensions: list[Any] | None = None, extension_paths: list[str] | None = None,
           no_extensions: bool = False, extension_flags: list[str] | None = None,
           skill_paths: list[str] | None = None, no_skills: bool = False,
           prompt_template_paths: list[str] | None = None, no_prompt_templates: bool = False,
           backends: Any = None, fork: str | None = None, approval_mode: str | None = None,
           mcp_servers: dict[str, Any] | None = None, sandbox_mode: str | None = None) -> _Plan:
    plan = _Plan()
    plan.__dict__.update(locals())
    del plan.__dict__["plan"]
    plan.cwd = os.path.abspath(cwd or os.getcwd())
    plan.adir = agent_dir()
    plan.settings = Settings(plan.adir, plan.cwd)
    if plan.settings.ignored_project_settings:
        sys.stderr.write(untrusted_notice(plan.settings.project_path, plan.settings.ignored_project_settings) + "\n")
    plan.ext_options = {"cwd": plan.cwd, "agent_dir": plan.adir, "cli_paths": list(extension_paths or []),
                        "no_extensions": no_extensions, "inline": list(extensions or [])}
    plan.loaded = None
    return plan


def _extensions_coroutine(plan: _Plan) -> Any:
    from pisces.core.extensions.binding import load_extensions  # noqa: PLC0415 - not needed at start-up

    return load_extensions(plan.ext_options, plan.settings)


def create_agent_session(**kwargs: Any) -> AgentSession:
    """A session for ``cwd`` (default: the current directory). Keyword arguments mirror the CLI flags
    (``provider``, ``model``, ``thinking``, ``no_session``, ``tools``, ``system_prompt``, ...); ``extensions``
    takes inline ``register(pi)`` functions, ``extension_paths`` extension files (like ``-e``). An ``async``
    register function needs ``create_agent_session_async`` when an event loop is already running."""
    plan = _begin(**kwargs)
    if extension_sources_present(plan.ext_options, plan.settings):
        from pisces.core.extensions.loader import run_now  # noqa: PLC0415 - not needed at start-up

        plan.loaded = run_now(_extensions_coroutine(plan))
    return _finish(plan)


async def create_agent_session_async(**kwargs: Any) -> AgentSession:
    """``create_agent_session`` for async code: register functions may be async and are awaited."""
    plan = _begin(**kwargs)
    if extension_sources_present(plan.ext_options, plan.settings):
        plan.loaded = await _extensions_coroutine(plan)
    return _finish(plan)


def _finish(plan: _Plan) -> AgentSession:
    cwd, adir, settings = plan.cwd, plan.adir, plan.settings
    provider, model, faux_script, api_key = plan.provider, plan.model, plan.faux_script, plan.api_key
    session, continue_session, tools, models = plan.session, plan.continue_session, plan.tools, plan.models
    use_faux = provider == "faux" or bool(faux_script)
    if use_faux:
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
    if plan.loaded is not None:
        from pisces.core.extensions.binding import apply_providers, resolve_flags  # noqa: PLC0415 - not needed at start-up

        apply_providers(plan.loaded, registry)
        resolve_flags(plan.loaded, plan.extension_flags or [])
    elif plan.extension_flags:
        raise UsageError(f"unrecognized arguments: {' '.join(plan.extension_flags)}")
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
    store = _open_store(cwd, settings, no_session=plan.no_session, session_dir=plan.session_dir, session=session,
                        continue_session=continue_session, fork=plan.fork)
    level = plan.thinking or cli_level or settings.default_thinking_level or "medium"
    if chosen is not None:
        level = clamp_thinking_level(chosen, level)
    else:
        level = "off"
    built: list[AgentSession] = []
    try:
        sandbox = Sandbox(settings, plan.sandbox_mode, people_approve=lambda: _people_approve(built))
    except ValueError as exc:
        raise SessionConfigError(str(exc)) from None
    all_tools = create_tools(cwd, shell_path=settings.shell_path, command_prefix=settings.shell_command_prefix,
                             backends=plan.backends, sandbox=sandbox)
    register_task_tool(all_tools, lambda: built[0], adir, plan.backends)  # not active by default: --tools ...,task
    if todos_enabled(settings):  # not active by default either: --tools ...,todo_write (docs/planning.md)
        all_tools["todo_write"] = TodoWriteTool(lambda: built[0].todos)
    if tools is None:
        active = list(DEFAULT_TOOL_NAMES)
    else:
        unknown = [t for t in tools if t not in all_tools]
        if unknown:
            raise SessionConfigError(f"Unknown tool(s): {', '.join(unknown)}. Available: {', '.join(all_tools)}")
        active = list(tools)

    sess: AgentSession | None = None

    def prompt_for(active_tools: list[Any]) -> str:
        listed, guidelines = [], default_guidelines([t.name for t in active_tools])
        for t in active_tools:
            definition = getattr(t, "definition", None)  # an extension tool: listed by its prompt_snippet
            if definition is None:
                listed.append((t.name, t.description.split("\n", 1)[0]))
            else:
                if definition.prompt_snippet:
                    listed.append((t.name, str(definition.prompt_snippet)))
                guidelines += [str(g) for g in definition.prompt_guidelines]
        skills = ""
        if sess is not None and any(t.name == "read" for t in active_tools):
            from pisces.core.resources.skills import format_skills_for_prompt, session_skills  # noqa: PLC0415 - not needed at start-up

            skills = format_skills_for_prompt(session_skills(sess))
        return build_system_prompt(cwd, tools=listed, guidelines=guidelines, agent_dir=adir,
                                   custom_prompt=plan.system_prompt, append=plan.append_system_prompt,
                                   context_files=plan.context_files, skills=skills)

    sess = AgentSession(cwd=cwd, settings=settings, registry=registry, store=store, model=chosen,
                        thinking_level=level, tools=all_tools, active_tools=active, system_prompt_builder=prompt_for)
    sess.scope_patterns = scope
    built.append(sess)
    sess.extension_options = plan.ext_options
    sess.resources.update(skillPaths=list(plan.skill_paths or []), skills=not plan.no_skills,
                          promptPaths=list(plan.prompt_template_paths or []),
                          promptTemplates=not plan.no_prompt_templates)
    if plan.loaded is not None:
        from pisces.core.extensions.binding import ExtensionHost  # noqa: PLC0415 - not needed at start-up

        ExtensionHost(sess, plan.ext_options, plan.loaded)

    if plan.approval_mode is not None and plan.approval_mode not in APPROVAL_MODES:
        raise SessionConfigError(f"Invalid approval mode '{plan.approval_mode}': use yolo, write or always-ask")
    approval = attach_approval(sess, cli_mode=plan.approval_mode)  # the approval gate (docs/approval.md)
    sandbox.escalate = approval.escalate  # a command the sandbox blocked asks the same person (docs/security.md)
    sess.sandbox = sandbox
    if todos_enabled(settings):
        attach_todos(sess)
    attach_stream_rules(sess)  # the rule files are read on the first turn (docs/planning.md)
    sess.load_plan_mode(only_if_used=True)  # a resumed session in plan mode stays in it (docs/planning.md)
    if plan.mcp_servers or _mcp_config_present(cwd, adir) or sess.settings.get("mcp.importConfigs"):
        # otherwise nothing of pisces.core.mcp is imported
        from pisces.core.mcp import attach as attach_mcp  # noqa: PLC0415 - only with an MCP configuration

        attach_mcp(sess, extra=plan.mcp_servers)
    if _has_budget_settings(settings):  # otherwise nothing of pisces.core.budget is even imported
        from pisces.core.budget import attach_from_settings  # noqa: PLC0415 - not needed at start-up

        attach_from_settings(sess)
    return sess


def _mcp_config_present(cwd: str, adir: str) -> bool:
    """Whether a file that may list MCP servers exists (the list is pisces.core.mcp.config.config_files)."""
    return any(os.path.exists(p) for p in (os.path.join(adir, "mcp.json"), os.path.join(cwd, ".mcp.json"),
                                           os.path.join(cwd, ".pisces", "mcp.json")))


def _people_approve(built: list[AgentSession]) -> bool:
    """Whether a person answers this session's approvals (a typed RPC client, ACP, the web UI): where the
    sandbox is on by default. pi's untyped clients and print mode keep pi's behaviour: no sandbox."""
    if not built or built[0].approval is None:
        return False
    return getattr(built[0].approval.current_approver(), "default_mode", "yolo") != "yolo"


def _has_budget_settings(settings: Settings) -> bool:
    """Whether a settings file has ``task.budget`` (nested) or a flat ``task.budget.*`` key."""
    for data in (settings.global_settings(), settings.project_settings()):
        task = data.get("task")
        if isinstance(task, dict) and isinstance(task.get("budget"), dict):
            return True
        if any(key.startswith("task.budget.") for key in data):
            return True
    return False


def _session_kwargs(args: Any) -> dict[str, Any]:
    tools: list[str] | None = None
    if getattr(args, "tools", None):
        tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    elif getattr(args, "no_tools", False) or getattr(args, "no_builtin_tools", False):
        tools = []  # no built-in tool; extension and host tools still come on when they register
    append = getattr(args, "append_system_prompt", None)
    if isinstance(append, list):  # repeatable: each is text or a file, joined as pi joins them

        parts = [resolve_prompt_input(a) for a in append]
        append = "\n\n".join(p for p in parts if p) or None
    return dict(
        provider=args.provider, model=args.model, models=getattr(args, "models", None), api_key=args.api_key,
        thinking=args.thinking, no_session=args.no_session, session_dir=args.session_dir,
        session=getattr(args, "session", None), continue_session=getattr(args, "continue_session", False),
        tools=tools, system_prompt=getattr(args, "system_prompt", None),
        append_system_prompt=append, fork=getattr(args, "fork", None),
        context_files=not getattr(args, "no_context_files", False), faux_script=getattr(args, "faux_script", None),
        extension_paths=getattr(args, "extensions", None), no_extensions=getattr(args, "no_extensions", False),
        extension_flags=getattr(args, "extension_flags", None), skill_paths=getattr(args, "skills", None),
        no_skills=getattr(args, "no_skills", False), prompt_template_paths=getattr(args, "prompt_templates", None),
        no_prompt_templates=getattr(args, "no_prompt_templates", False),
        approval_mode=getattr(args, "approval_mode", None), sandbox_mode=getattr(args, "sandbox_mode", None))


def create_session_from_args(args: Any, **overrides: Any) -> AgentSession:
    """A session from the CLI flags; ``overrides`` (``cwd``, ``session``, ``backends``, ...) win over them."""
    return create_agent_session(**{**_session_kwargs(args), **overrides})


async def open_session_from_args(args: Any, **overrides: Any) -> AgentSession:
    """``create_session_from_args`` for the modes, which run in an event loop (async register functions)."""
    return await create_agent_session_async(**{**_session_kwargs(args), **overrides})
