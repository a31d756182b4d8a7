"""One small function per RPC command, in one table. Handlers translate; the logic lives in AgentSession.

A handler gets the server (for ``session`` and ``respond``) and the decoded command dict. It returns the
response ``data`` (``NO_DATA`` for none), or an awaitable of it, or raises (RpcError or any exception) for
an error response. Missing fields give pi's exact error strings where pi has one.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Callable

from msgspec import UNSET

from pisces.ai.models import supported_thinking_levels
from pisces.core.config.trust import save_decision
from pisces.core.session.views_pi import entries_since, pi_tree
from pisces.modes.host.encoding import DELTAS, FULL, PROFILES, profile_for

NO_DATA: Any = UNSET  # the response has no ``data`` key
ANSWERED: Any = object()  # the handler already sent its response


class RpcError(Exception):
    pass


# -- field access ---------------------------------------------------------------------------
_JS_UNDEFINED_READ = "Cannot read properties of undefined (reading '{}')"


def _text(cmd: dict[str, Any], key: str = "message", reading: str = "startsWith") -> str:
    value = cmd.get(key)
    if value is None:
        raise RpcError(_JS_UNDEFINED_READ.format(reading))
    if not isinstance(value, str):
        raise RpcError(f"Invalid '{key}': expected a string, got {_kind(value)}")
    return value


def _opt_str(cmd: dict[str, Any], key: str) -> str | None:
    value = cmd.get(key)
    if value is not None and not isinstance(value, str):
        raise RpcError(f"Invalid '{key}': expected a string, got {_kind(value)}")
    return value


def _bool(cmd: dict[str, Any], key: str) -> bool:
    value = cmd.get(key)
    if not isinstance(value, bool):
        raise RpcError(f"Invalid '{key}': expected true or false, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)


def _images(cmd: dict[str, Any]) -> list[Any] | None:
    from pisces.core.session.prompt_input import parse_images  # noqa: PLC0415 - not needed at start-up

    try:
        return parse_images(cmd.get("images"), cmd.get("attachments"))
    except ValueError as exc:
        raise RpcError(str(exc)) from None


def _attachments(cmd: dict[str, Any]) -> dict[str, Any]:
    """The legacy ``attachments``, echoed on the UserMessage as sent (their images and text are its content)."""
    attachments = cmd.get("attachments")
    return {"attachments": attachments} if isinstance(attachments, list) and attachments else {}


async def _fetched(images: list[Any] | None) -> list[Any] | None:
    """Images given by URL, fetched (bounded in size and time); a failure is the command's error."""
    from pisces.core.session.image_urls import fetch_images, has_urls  # noqa: PLC0415 - only with images

    if not has_urls(images):
        return images
    try:
        return await fetch_images(images)
    except ValueError as exc:
        raise RpcError(str(exc)) from None


# -- prompting --------------------------------------------------------------------------------
async def _prompt(server: Any, cmd: dict[str, Any]) -> Any:
    text = _text(cmd)
    images = await _fetched(_images(cmd))
    behavior = _opt_str(cmd, "streamingBehavior")
    if behavior is not None and behavior not in ("steer", "followUp"):
        raise RpcError(f"Invalid streamingBehavior '{behavior}': use 'steer' or 'followUp'")
    req_id, ctype = cmd.get("id"), cmd.get("type")
    accepted: list[bool] = []

    def on_accepted() -> None:
        accepted.append(True)
        server.respond(req_id, ctype)

    try:
        await server.session.prompt(text, images=images, streaming_behavior=behavior, on_accepted=on_accepted,
                                    **_attachments(cmd))
    except Exception as exc:
        if not accepted and not _is_budget_refusal(exc):
            raise  # a preflight error is the prompt's one response
        # seed 000: "prompt and abort_and_prompt return immediate success, then may emit a later error
        # response with the same id" (a spent budget, a failure once the run was accepted)
        if not accepted:
            on_accepted()
        message = str(exc) or type(exc).__name__
        sys.stderr.write(f"pisces: the run of prompt {req_id!r} failed: {message}\n")
        server.respond(req_id, ctype, error=message)
    return ANSWERED


def _is_budget_refusal(exc: Exception) -> bool:
    budget = sys.modules.get("pisces.core.budget.controller")  # not loaded: no budget, no refusal
    return budget is not None and isinstance(exc, budget.BudgetExceededError)


def h_prompt(server: Any, cmd: dict[str, Any]) -> Any:
    _text(cmd)  # missing message: answered at once, as pi
    return _prompt(server, cmd)


def _queue(server: Any, cmd: dict[str, Any], method: str) -> Any:
    text, images = _text(cmd), _images(cmd)
    if images is not None and any(type(b).__name__ == "UrlImage" for b in images):
        async def later() -> Any:
            getattr(server.session, method)(text, images=await _fetched(images), **_attachments(cmd))
            return NO_DATA

        return later()
    getattr(server.session, method)(text, images=images, **_attachments(cmd))
    return NO_DATA


def h_steer(server: Any, cmd: dict[str, Any]) -> Any:
    return _queue(server, cmd, "steer")


def h_follow_up(server: Any, cmd: dict[str, Any]) -> Any:
    return _queue(server, cmd, "follow_up")


async def _abort(server: Any) -> Any:
    await server.session.abort()
    return NO_DATA


def h_abort(server: Any, cmd: dict[str, Any]) -> Any:
    return _abort(server)


async def _abort_and_prompt(server: Any, cmd: dict[str, Any]) -> Any:
    await server.session.abort()
    return await _prompt(server, cmd)


def h_abort_and_prompt(server: Any, cmd: dict[str, Any]) -> Any:
    _text(cmd)
    return _abort_and_prompt(server, cmd)


async def _cancelled(awaitable: Any) -> Any:
    return {"cancelled": bool(await awaitable)}


def h_new_session(server: Any, cmd: dict[str, Any]) -> Any:
    return _cancelled(server.session.new_session(parent_session=_opt_str(cmd, "parentSession")))


# -- state and model --------------------------------------------------------------------------
def h_get_state(server: Any, cmd: dict[str, Any]) -> Any:
    return server.session.get_state()


def h_get_messages(server: Any, cmd: dict[str, Any]) -> Any:
    messages = server.session.messages
    last = cmd.get("last")  # optional (pisces): only the last N messages, and how many there are in all
    if isinstance(last, int) and not isinstance(last, bool) and last >= 0:
        return {"messages": list(messages[len(messages) - last:]) if last else [], "total": len(messages)}
    return {"messages": messages}


def h_set_model(server: Any, cmd: dict[str, Any]) -> Any:
    provider, model_id = cmd.get("provider"), cmd.get("modelId")
    return server.session.set_model_by_id(provider, model_id)


def h_cycle_model(server: Any, cmd: dict[str, Any]) -> Any:
    return server.session.cycle_model()


def h_get_available_models(server: Any, cmd: dict[str, Any]) -> Any:
    return {"models": server.session.available_models()}


def h_set_thinking_level(server: Any, cmd: dict[str, Any]) -> Any:
    server.session.set_thinking_level(_text(cmd, "level", "toLowerCase"))
    return NO_DATA


def h_cycle_thinking_level(server: Any, cmd: dict[str, Any]) -> Any:
    level = server.session.cycle_thinking_level()
    return None if level is None else {"level": level}


def _mode_setter(setter: str, allowed: tuple[str, ...]) -> Callable[[Any, dict[str, Any]], Any]:
    def handler(server: Any, cmd: dict[str, Any]) -> Any:
        mode = cmd.get("mode")
        if mode not in allowed:
            raise RpcError(f"Invalid mode {_quoted(mode)}: use {' or '.join(repr(a) for a in allowed)}")
        getattr(server.session, setter)(mode)
        return NO_DATA

    return handler


def _quoted(value: Any) -> str:
    return f"'{value}'" if isinstance(value, str) else _kind(value)


def h_set_auto_compaction(server: Any, cmd: dict[str, Any]) -> Any:
    server.session.set_auto_compaction(_bool(cmd, "enabled"))
    return NO_DATA


def h_set_auto_retry(server: Any, cmd: dict[str, Any]) -> Any:
    server.session.set_auto_retry(_bool(cmd, "enabled"))
    return NO_DATA


async def _abort_retry(server: Any) -> Any:
    await server.session.retry.cancel_and_wait()  # answered after the auto_retry_end it causes
    return NO_DATA


def h_abort_retry(server: Any, cmd: dict[str, Any]) -> Any:
    return _abort_retry(server)


# -- compaction, bash, export -------------------------------------------------------------------
def h_compact(server: Any, cmd: dict[str, Any]) -> Any:
    return server.session.compact(_opt_str(cmd, "customInstructions"))


def h_bash(server: Any, cmd: dict[str, Any]) -> Any:
    command = cmd.get("command")
    if command is None:
        command = "undefined"  # pi runs the literal text "undefined" (JavaScript's String(undefined))
    elif not isinstance(command, str):
        raise RpcError(f"Invalid 'command': expected a string, got {_kind(command)}")
    return server.session.run_bash(command)


def h_abort_bash(server: Any, cmd: dict[str, Any]) -> Any:
    server.session.abort_bash()
    return NO_DATA


def h_export_html(server: Any, cmd: dict[str, Any]) -> Any:
    return server.session.export_html(_opt_str(cmd, "outputPath"))


# -- sessions ----------------------------------------------------------------------------------
def h_get_session_stats(server: Any, cmd: dict[str, Any]) -> Any:
    return server.session.session_stats()


def h_switch_session(server: Any, cmd: dict[str, Any]) -> Any:
    path = cmd.get("sessionPath")
    if not isinstance(path, str):
        raise RpcError('The "paths[0]" argument must be of type string. Received '
                       + ("undefined" if path is None else _kind(path)))
    return _cancelled(server.session.switch_session(path))


def h_rename_session(server: Any, cmd: dict[str, Any]) -> Any:
    from pisces.core.session.session_files import rename_session  # noqa: PLC0415 - not needed at start-up

    return rename_session(server.session, cmd.get("sessionPath"), cmd.get("name"))


def h_delete_session(server: Any, cmd: dict[str, Any]) -> Any:
    from pisces.core.session.session_files import delete_session  # noqa: PLC0415 - not needed at start-up

    return delete_session(server.session, cmd.get("sessionPath"))


def h_fork(server: Any, cmd: dict[str, Any]) -> Any:
    entry_id = cmd.get("entryId")
    return server.session.fork(entry_id if isinstance(entry_id, str) else "")


def h_get_fork_messages(server: Any, cmd: dict[str, Any]) -> Any:
    return {"messages": server.session.fork_messages()}


def h_clone(server: Any, cmd: dict[str, Any]) -> Any:
    return _cancelled(server.session.clone())


def h_get_last_assistant_text(server: Any, cmd: dict[str, Any]) -> Any:
    text = server.session.last_assistant_text()
    return {} if text is None else {"text": text}


def h_set_session_name(server: Any, cmd: dict[str, Any]) -> Any:
    server.session.set_session_name(_text(cmd, "name", "trim"))
    return NO_DATA


def h_get_commands(server: Any, cmd: dict[str, Any]) -> Any:
    return {"commands": server.session.commands()}


def h_list_sessions(server: Any, cmd: dict[str, Any]) -> Any:
    scope = cmd.get("scope") or "cwd"
    if scope == "current":
        scope = "cwd"
    if scope not in ("cwd", "all"):
        raise RpcError(f"Invalid scope {_quoted(scope)}: use 'cwd' or 'all'")
    sessions = server.session.list_sessions(scope, _opt_str(cmd, "sessionDir"))
    if cmd.get("includeSearchText") is False:  # later pi: the search text only on request (seed 002: always)
        for s in sessions:
            s.pop("allMessagesText", None)
    return {"sessions": sessions}


def h_get_session_tree(server: Any, cmd: dict[str, Any]) -> Any:
    return server.session.session_tree()


def h_navigate_tree(server: Any, cmd: dict[str, Any]) -> Any:
    target = _opt_str(cmd, "targetId")
    if not target:
        raise RpcError("navigate_tree needs 'targetId'")
    return server.session.navigate_tree(
        target, summarize=bool(cmd.get("summarize")), custom_instructions=_opt_str(cmd, "customInstructions"),
        replace_instructions=bool(cmd.get("replaceInstructions")), label=_opt_str(cmd, "label"))


def h_set_entry_label(server: Any, cmd: dict[str, Any]) -> Any:
    return _label_entry(server, cmd, "set_entry_label", "targetId", "entryId")


def _label_entry(server: Any, cmd: dict[str, Any], command: str, key: str, other_key: str) -> Any:
    """set_entry_label and later pi's set_label: one command under two names, each naming the entry by its
    own key first (either key is taken)."""
    target = _opt_str(cmd, key) or _opt_str(cmd, other_key)
    if not target:
        raise RpcError(f"{command} needs '{key}'")
    server.session.set_entry_label(target, _opt_str(cmd, "label"))
    return NO_DATA


# -- later pi's names and shapes -----------------------------------------------------------------
def h_set_label(server: Any, cmd: dict[str, Any]) -> Any:
    return _label_entry(server, cmd, "set_label", "entryId", "targetId")


def h_get_tree(server: Any, cmd: dict[str, Any]) -> Any:
    store = server.session.store
    return pi_tree(store.get_entries(), store.get_leaf_id(), store.get_labels(),
                   include_content=cmd.get("includeContent") is True, flat=cmd.get("flat") is True)


def h_get_entries(server: Any, cmd: dict[str, Any]) -> Any:
    since = _opt_str(cmd, "since")
    store = server.session.store
    try:
        entries = entries_since(store.get_entries(), since)
    except KeyError:
        raise RpcError(f"Entry {since} not found: 'since' takes an entry id from an earlier get_entries") from None
    return {"entries": entries, "leafId": store.get_leaf_id()}


def h_get_available_thinking_levels(server: Any, cmd: dict[str, Any]) -> Any:
    return {"levels": supported_thinking_levels(server.session.model)}


def h_get_context_usage(server: Any, cmd: dict[str, Any]) -> Any:
    usage = server.session.context_usage()
    return {} if usage is None else {"usage": usage}


def h_get_tools(server: Any, cmd: dict[str, Any]) -> Any:
    return server.session.tools_info()


def h_set_active_tools(server: Any, cmd: dict[str, Any]) -> Any:
    names = cmd.get("toolNames")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise RpcError("Invalid 'toolNames': expected an array of tool names")
    return {"activeToolNames": server.session.set_active_tools(names)}


def h_trust_project(server: Any, cmd: dict[str, Any]) -> Any:
    trusted = cmd.get("trusted", True)
    if not isinstance(trusted, bool):
        raise RpcError(f"Invalid 'trusted': expected true or false, got {_kind(trusted)}")
    return asyncio.to_thread(save_decision, server.session.settings, trusted)  # waits for trust.json's lock


def h_set_stream_options(server: Any, cmd: dict[str, Any]) -> Any:
    """What this client's message_update frames carry (see pisces.modes.host.encoding)."""

    out = server.out
    profile = cmd.get("profile")
    if profile is not None:
        if profile not in PROFILES:
            raise RpcError(f"Invalid profile {_quoted(profile)}: use {' or '.join(repr(p) for p in PROFILES)}")
    if any(k in cmd for k in ("partial", "messageSnapshots")):
        partial = cmd.get("partial", out.profile == FULL if profile is None else profile == FULL)
        snapshots = cmd.get("messageSnapshots", out.profile != DELTAS if profile is None else profile != DELTAS)
        if not isinstance(partial, bool) or not isinstance(snapshots, bool):
            raise RpcError("Invalid stream options: 'partial' and 'messageSnapshots' must be true or false")
        chosen = profile_for(partial=partial, message_snapshots=snapshots)
        if profile is not None and chosen != profile:
            raise RpcError(f"profile '{profile}' contradicts partial/messageSnapshots (they give '{chosen}')")
        profile = chosen
    seq = cmd.get("seq")
    if seq is not None and not isinstance(seq, bool):
        raise RpcError("Invalid stream options: 'seq' must be true or false")
    if profile is not None:
        out.profile = profile
    if seq is not None:
        out.seq = seq  # broadcast frames carry the host's sequence number (pisces.modes.host.host)
    return {"profile": out.profile, "partial": out.profile == FULL, "messageSnapshots": out.profile != DELTAS,
            "seq": out.seq}


def h_set_budget(server: Any, cmd: dict[str, Any]) -> Any:
    from pisces.core.budget import BudgetPolicyError, set_session_budget  # noqa: PLC0415 - not needed at start-up

    try:
        return set_session_budget(server.session, cmd.get("budget"))
    except BudgetPolicyError as exc:
        raise RpcError(f"Invalid budget: {exc}") from None


async def _reload(server: Any) -> Any:
    await server.session.reload_resources()
    return {"commands": server.session.commands()}


def h_reload_resources(server: Any, cmd: dict[str, Any]) -> Any:
    return _reload(server)


def h_set_host_tools(server: Any, cmd: dict[str, Any]) -> Any:
    try:
        names = server.host_tool_bridge().set_tools(server.session, cmd.get("tools"))
    except ValueError as exc:
        raise RpcError(str(exc)) from None
    return {"toolNames": names}


# -- MCP servers (docs/mcp.md) -------------------------------------------------------------------------
def _mcp(server: Any) -> Any:
    manager = getattr(server.session, "mcp", None)
    if manager is None:
        raise RpcError("No MCP server is configured (docs/mcp.md: mcpServers in ~/.pisces/agent/mcp.json, "
                       ".pisces/mcp.json or .mcp.json)")
    return manager


def h_mcp_status(server: Any, cmd: dict[str, Any]) -> Any:
    manager = getattr(server.session, "mcp", None)
    return {"servers": []} if manager is None else manager.status()


async def _mcp_call(coro: Any) -> Any:
    try:
        return await coro
    except ValueError as exc:
        raise RpcError(str(exc)) from None


def h_mcp_toggle(server: Any, cmd: dict[str, Any]) -> Any:
    enabled = cmd.get("enabled")
    if not isinstance(enabled, bool):
        raise RpcError("mcp_toggle needs 'server' (a name) and 'enabled' (true or false)")
    return _mcp_call(_mcp(server).toggle(cmd.get("server"), enabled))


def h_mcp_reconnect(server: Any, cmd: dict[str, Any]) -> Any:
    return _mcp_call(_mcp(server).reconnect(cmd.get("server")))


# -- tool approval (docs/approval.md) -----------------------------------------------------------------
def h_negotiate_protocol(server: Any, cmd: dict[str, Any]) -> Any:
    caps = cmd.get("clientCapabilities", cmd.get("capabilities"))
    if caps is None:
        caps = {}
    if not isinstance(caps, dict):
        raise RpcError(f"Invalid 'clientCapabilities': expected an object, got {_kind(caps)}")
    version = cmd.get("protocolVersion")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
        raise RpcError(f"Invalid 'protocolVersion': expected a positive integer, got {_kind(version)}")
    return server.set_client_capabilities(caps)


def _approval(server: Any) -> Any:
    approval = getattr(server.session, "approval", None)
    if approval is None:
        raise RpcError("Tool approval is not available in this session")
    return approval


async def _approval_call(fn: Any, *args: Any) -> Any:
    try:
        return await asyncio.to_thread(fn, *args)  # settings are files: read and written off the event loop
    except ValueError as exc:
        raise RpcError(f"Invalid approval rule: {exc}") from None


def h_list_approval_rules(server: Any, cmd: dict[str, Any]) -> Any:
    return asyncio.to_thread(_approval(server).list_rules)


def h_add_approval_rule(server: Any, cmd: dict[str, Any]) -> Any:
    if "rule" not in cmd:
        raise RpcError("add_approval_rule needs 'rule': {tool, match?, approval, reason?}")
    return _approval_call(_approval(server).add_rule, cmd.get("rule"), cmd.get("index"))


def h_remove_approval_rule(server: Any, cmd: dict[str, Any]) -> Any:
    if "index" not in cmd:
        raise RpcError("remove_approval_rule needs 'index' (as list_approval_rules numbers the global rules)")
    return _approval_call(_approval(server).remove_rule, cmd.get("index"), cmd.get("rule"))


async def _set_approval_mode(approval: Any, mode: Any, persist: bool) -> Any:
    try:
        state = approval.set_mode(mode)
    except ValueError as exc:
        raise RpcError(str(exc)) from None
    if persist:
        await asyncio.to_thread(approval.save_mode, mode)
    return state


def h_set_approval_mode(server: Any, cmd: dict[str, Any]) -> Any:
    if "mode" not in cmd:
        raise RpcError("set_approval_mode needs 'mode': 'yolo', 'write', 'always-ask' or null")
    persist = cmd.get("persist", False)
    if not isinstance(persist, bool):
        raise RpcError(f"Invalid 'persist': expected true or false, got {_kind(persist)}")
    return _set_approval_mode(_approval(server), cmd.get("mode"), persist)


def h_set_todos(server: Any, cmd: dict[str, Any]) -> Any:
    from pisces.core.planning.todos import TodoError  # noqa: PLC0415 - not needed at start-up

    todos = getattr(server.session, "todos", None)
    if todos is None:
        raise RpcError("Todos are turned off in this session (setting todo.enabled is false)")
    if "phases" not in cmd:
        raise RpcError("set_todos needs 'phases': [{name, tasks: [{content, status?}]}]")
    try:
        return {"todoPhases": todos.set_phases(cmd.get("phases"))}
    except TodoError as exc:
        raise RpcError(f"Invalid todos: {exc}") from None


async def h_set_plan_mode(server: Any, cmd: dict[str, Any]) -> Any:
    enabled = cmd.get("enabled")
    if not isinstance(enabled, bool):
        raise RpcError(f"set_plan_mode needs 'enabled': true or false, got {_kind(enabled)}")
    return {"planMode": await server.session.load_plan_mode().set_enabled(enabled)}


def h_set_sandbox(server: Any, cmd: dict[str, Any]) -> Any:
    from pisces.modes.host.sandbox_command import set_sandbox  # noqa: PLC0415 - loaded on first use, not at start-up

    return set_sandbox(server, cmd)


def h_clear_queue(server: Any, cmd: dict[str, Any]) -> Any:
    steering, follow_up = server.session.clear_queue()
    return {"steering": steering, "followUp": follow_up}


COMMANDS: dict[str, Callable[[Any, dict[str, Any]], Any]] = {
    "prompt": h_prompt,
    "steer": h_steer,
    "follow_up": h_follow_up,
    "abort": h_abort,
    "abort_and_prompt": h_abort_and_prompt,
    "new_session": h_new_session,
    "get_state": h_get_state,
    "get_messages": h_get_messages,
    "set_model": h_set_model,
    "cycle_model": h_cycle_model,
    "get_available_models": h_get_available_models,
    "set_thinking_level": h_set_thinking_level,
    "cycle_thinking_level": h_cycle_thinking_level,
    "set_steering_mode": _mode_setter("set_steering_mode", ("all", "one-at-a-time")),
    "set_follow_up_mode": _mode_setter("set_follow_up_mode", ("all", "one-at-a-time")),
    "set_interrupt_mode": _mode_setter("set_interrupt_mode", ("immediate", "wait")),
    "compact": h_compact,
    "set_auto_compaction": h_set_auto_compaction,
    "set_auto_retry": h_set_auto_retry,
    "abort_retry": h_abort_retry,
    "bash": h_bash,
    "abort_bash": h_abort_bash,
    "get_session_stats": h_get_session_stats,
    "export_html": h_export_html,
    "switch_session": h_switch_session,
    "fork": h_fork,
    "get_fork_messages": h_get_fork_messages,
    "clone": h_clone,
    "get_last_assistant_text": h_get_last_assistant_text,
    "set_session_name": h_set_session_name,
    "get_commands": h_get_commands,
    "list_sessions": h_list_sessions,
    "get_session_tree": h_get_session_tree,
    "navigate_tree": h_navigate_tree,
    "set_entry_label": h_set_entry_label,
    "get_context_usage": h_get_context_usage,
    "get_tools": h_get_tools,
    "set_active_tools": h_set_active_tools,
    "clear_queue": h_clear_queue,
    "trust_project": h_trust_project,
    "set_stream_options": h_set_stream_options,
    "get_tree": h_get_tree,
    "set_label": h_set_label,
    "get_entries": h_get_entries,
    "get_available_thinking_levels": h_get_available_thinking_levels,
    "set_budget": h_set_budget,
    "reload_resources": h_reload_resources,
    "set_host_tools": h_set_host_tools,
    "negotiate_protocol": h_negotiate_protocol,
    "list_approval_rules": h_list_approval_rules,
    "add_approval_rule": h_add_approval_rule,
    "remove_approval_rule": h_remove_approval_rule,
    "set_approval_mode": h_set_approval_mode,
    "set_todos": h_set_todos,
    "set_plan_mode": h_set_plan_mode,
    "rename_session": h_rename_session,
    "delete_session": h_delete_session,
    "mcp_status": h_mcp_status,
    "mcp_toggle": h_mcp_toggle,
    "mcp_reconnect": h_mcp_reconnect,
    "set_sandbox": h_set_sandbox,
}
