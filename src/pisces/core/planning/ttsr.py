"""``StreamRules``: stream rules (TTSR) on one session, through a few callables.

What it is given, and nothing more:

* ``load()``: the rules and the errors of the rule files (``rules.load_rules`` over the rule directories);
* ``emit(event)``: the session's event sink (``ttsr_triggered``);
* ``abort()``: stop the generation that is streaming;
* ``append_entry(custom_type, data)`` and ``branch()``: the session file (the fired rules are written as
  ``pisces.ttsr`` custom entries, and restored from the branch, so a resumed session does not fire a
  ``once`` rule again);
* ``settings``: ``ttsr.enabled`` (true), ``ttsr.contextMode`` (``discard`` | ``keep``), ``ttsr.repeatMode``
  (``once`` | ``after-gap``), ``ttsr.repeatGap`` (10 replies). ``ttsr.enabled`` is read once a turn (at its
  first delta), not for every delta: a change applies from the next turn.

The session feeds it every event. While a reply streams, each text, thinking or tool-call delta is added to
that block's window and checked against the rules whose scope covers it; on a match the rules that match are
recorded, ``ttsr_triggered{rules}`` is emitted and the generation is aborted at once. When the run has
stopped, the session asks ``after_run()`` for what to continue with: one ``<system-interrupt>`` message per
rule (and whether to drop the partial reply from the context first).
"""

from __future__ import annotations

from typing import Any, Callable

from pisces.agent.types import MessageEndEvent, MessageUpdateEvent, TurnStartEvent
from pisces.ai.providers._shared import parse_partial_json
from pisces.ai.types import AssistantMessage
from pisces.core.planning.session_todos import setting
from pisces.core.store import CustomMessage, MessageEntry, entry_type

ENTRY_TYPE = "pisces.ttsr"
INTERRUPT_TYPE = "ttsr_interrupt"
DEFAULT_REPEAT_GAP = 10
HEAD = 4096  # characters of a tool call's arguments searched for its path
_KINDS = {"text_delta": "text", "thinking_delta": "thinking", "toolcall_delta": "tool"}


def interrupt_text(rule: Any) -> str:
    return (f'<system-interrupt reason="rule_violation" rule="{_attr(rule.name)}" path="{_attr(rule.path)}">\n'
            f"{rule.body}\n</system-interrupt>")


def _attr(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


class StreamRules:
    def __init__(self, *, load: Callable[[], tuple[list[Any], list[str]]], emit: Callable[[dict[str, Any]], None],
                 abort: Callable[[], None], append_entry: Callable[[str, Any], Any], branch: Callable[[], list[Any]],
                 settings: Any = None) -> None:
        self._load, self._emit, self._abort = load, emit, abort
        self._append_entry, self._branch, self._settings = append_entry, branch, settings
        self._rules: list[Any] | None = None  # loaded on the first turn (RE2 is imported then, not at start-up)
        self.errors: list[str] = []
        self._buffers: dict[int, str] = {}
        self._heads: dict[int, str] = {}  # the first characters of each tool call's arguments (its path)
        self._pending: list[Any] = []  # rules fired during the current generation
        self._enabled_now: bool | None = None  # ``enabled``, read once a turn (None: not read yet this turn)
        self.replies = 0  # assistant replies on this branch (the clock of repeatMode after-gap)
        self.fired: dict[str, int] = {}  # rule name -> the reply count when it last fired
        self.restore()

    # -- settings -----------------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        return setting(self._settings, "ttsr.enabled", True) is not False

    @property
    def context_mode(self) -> str:
        return "keep" if setting(self._settings, "ttsr.contextMode", "discard") == "keep" else "discard"

    @property
    def repeat_mode(self) -> str:
        return "after-gap" if setting(self._settings, "ttsr.repeatMode", "once") == "after-gap" else "once"

    @property
    def repeat_gap(self) -> int:
        value = setting(self._settings, "ttsr.repeatGap", DEFAULT_REPEAT_GAP)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
        return int(value) if ok else DEFAULT_REPEAT_GAP

    # -- rules --------------------------------------------------------------------------------------
    def rules(self) -> list[Any]:
        if self._rules is None:
            self._rules, self.errors = self._load()
        return self._rules

    def _eligible(self, rule: Any) -> bool:
        last = self.fired.get(rule.name)
        if last is None:
            return True
        return self.repeat_mode == "after-gap" and self.replies - last >= self.repeat_gap  # replies since

    # -- fed by the session -------------------------------------------------------------------------
    def on_event(self, event: Any) -> None:
        if isinstance(event, MessageUpdateEvent):
            self.on_update(event)
        elif isinstance(event, TurnStartEvent):
            self._buffers.clear()
            self._heads.clear()
            self._enabled_now = None  # the settings are read again for the new turn
        elif isinstance(event, MessageEndEvent):
            if isinstance(event.message, AssistantMessage):
                self.replies += 1
                self._buffers.clear()
                self._heads.clear()
        elif isinstance(event, dict) and event.get("type") == "session_changed":
            self._enabled_now = None
            if event.get("reason") == "reload":
                self._rules = None
            self._pending = []
            self.restore()

    def on_update(self, event: MessageUpdateEvent) -> None:
        """A ``message_update`` (the session calls this for every streamed event, so the common cases end
        first: no rule files, a rule already fired, the rules turned off for this turn)."""
        rules = self._rules
        if rules is not None and not rules or self._pending:
            return
        enabled = self._enabled_now
        if enabled is None:
            enabled = self._enabled_now = self.enabled
        if enabled:
            self._on_delta(event)

    def _on_delta(self, event: MessageUpdateEvent) -> None:
        ame = event.assistantMessageEvent
        kind = _KINDS.get(_tag(ame) or "")
        if kind is None:
            return
        rules = self.rules()
        if not rules:
            return
        index = ame.contentIndex
        window = (self._buffers.get(index, "") + ame.delta)[-16384:]
        self._buffers[index] = window
        tool = path = None
        if kind == "tool":
            block = _block(event.message, index)
            tool = getattr(block, "name", None)
            head = self._heads.get(index, "")
            if len(head) < HEAD:
                self._heads[index] = head = (head + ame.delta)[:HEAD]
            path = _path(getattr(block, "arguments", None)) or _path(parse_partial_json(head))
        hits = [r for r in rules if self._eligible(r) and r.applies(kind, tool, path) and r.matches(window)]
        if hits:
            self._fire(hits)

    def _fire(self, rules: list[Any]) -> None:
        self._pending = rules
        for rule in rules:
            self.fired[rule.name] = self.replies + 1  # counted from the reply it interrupts
        self._append_entry(ENTRY_TYPE, {"rules": [r.name for r in rules], "reply": self.replies})
        self._emit({"type": "ttsr_triggered", "rules": [
            {"name": r.name, "path": r.path, "description": r.description, "ttsrTrigger": r.trigger,
             "scope": [repr(s) for s in r.scopes], "content": r.body} for r in rules]})
        self._abort()

    def after_run(self) -> tuple[list[CustomMessage], bool] | None:
        """After the run stopped: (one interrupt message per fired rule, whether to drop the partial reply
        from the context), or None when no rule fired."""
        if not self._pending:
            return None
        rules, self._pending = self._pending, []
        discard = self.context_mode == "discard"
        if discard:
            self.replies -= 1  # the interrupted reply leaves the branch (restore() would not count it)
        messages = [CustomMessage(customType=INTERRUPT_TYPE, content=interrupt_text(r), display=True,
                                  details={"rule": r.name, "path": r.path}) for r in rules]
        return messages, discard

    def restore(self) -> None:
        """Which rules fired on the current branch, and when (counted in assistant replies)."""
        self.fired, self.replies = {}, 0
        for entry in self._branch():
            kind = entry_type(entry)
            if kind == "message" and isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
                self.replies += 1
            elif kind == "custom" and getattr(entry, "customType", None) == ENTRY_TYPE:
                data = getattr(entry, "data", None)
                names = data.get("rules") if isinstance(data, dict) else None
                for name in names if isinstance(names, list) else []:
                    if isinstance(name, str):
                        self.fired[name] = self.replies + 1


def _path(args: Any) -> str | None:
    if isinstance(args, dict):
        return next((args[k] for k in ("path", "file_path", "filePath") if isinstance(args.get(k), str)), None)
    return None


def _tag(ame: Any) -> str | None:
    config = getattr(ame, "__struct_config__", None)
    return getattr(config, "tag", None)


def _block(message: Any, index: int) -> Any:
    content = getattr(message, "content", None)
    if isinstance(content, list) and 0 <= index < len(content):
        return content[index]
    return None


def attach(session: Any) -> StreamRules:
    """Give ``session`` its stream rules (``session.ttsr``): the user's and (trusted) project's rule files."""
    def load() -> tuple[list[Any], list[str]]:
        from pisces.core.config.paths import agent_dir  # noqa: PLC0415 - on the first turn, not at start-up
        from pisces.core.planning.rules import load_rules, rule_dirs  # noqa: PLC0415 - on the first turn

        settings = session.settings
        return load_rules(rule_dirs(agent_dir(), session.cwd, settings.project_trusted))

    ttsr = StreamRules(load=load, emit=session.emit, abort=lambda: session.agent.abort(),
                       append_entry=lambda kind, data: session.store.append_custom_entry(kind, data),
                       branch=lambda: session.store.get_branch(), settings=session.settings)
    session.ttsr = ttsr
    return ttsr
