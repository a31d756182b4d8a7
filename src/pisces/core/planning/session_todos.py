"""``SessionTodos``: one session's todo list, its persistence and its reminders, through a few callables.

What it is given, and nothing more:

* ``emit(event)``: the session's event sink (``todo_update`` and ``todo_reminder`` go to every client);
* ``append_entry(custom_type, data)``: adds a ``custom`` entry to the session file (pi opens such files and
  ignores the entry: it is extension state, never LLM context);
* ``branch()``: the entries from the root to the current leaf, to restore the list from;
* ``settings``: read on use, so that ``reload_resources`` applies changed values.

The session feeds it every event it emits (``on_event``): a ``session_changed`` (new, resume, fork, tree,
reload) restores the list from the new branch, a user message starts a new prompt (the reminder count goes
back to zero). After a run ends the session asks ``reminder(last)`` whether to continue it.

Guarantees: every change is written to the session file before the event says so; the list on screen after a
resume, fork or tree move is the last one written on that branch; at most ``todo.reminders.max`` reminders
follow one user prompt, and none when the run ended in an error or an abort.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from pisces.agent.types import MessageStartEvent
from pisces.ai.types import UserMessage
from pisces.core.planning.todos import TodoError, TodoList, render
from pisces.core.store import CustomMessage, entry_type

ENTRY_TYPE = "pisces.todos"  # the customType of the session entries that hold the list
REMINDER_TYPE = "todo_reminder"  # the customType of the reminder message the model is sent
DEFAULT_MAX_REMINDERS = 3


@functools.lru_cache(maxsize=256)
def _steps(key: str) -> tuple[tuple[tuple[str, int], ...], ...]:
    """For each part ``i`` of a dotted key, the names to try there, longest first, with the part each one
    reaches (``"a.b"`` -> ``((("a.b", 2), ("a", 1)), (("b", 2),))``): built once a key, not per lookup."""
    parts = key.split(".")
    return tuple(tuple((".".join(parts[i:j]), j) for j in range(len(parts), i, -1)) for i in range(len(parts)))


def setting(settings: Any, key: str, default: Any) -> Any:
    """A setting given nested (``{"todo": {"reminders": {"max": 3}}}``) or flat (``{"todo.reminders.max": 3}``,
    oh-my-pi's spelling, where ``todo.reminders`` is also a key of its own)."""
    view = getattr(settings, "merged_view", None)  # read in place: this runs for every streamed event
    merged = view() if view is not None else settings.as_dict() if settings is not None else {}
    node: Any = merged
    steps = _steps(key)
    i = 0
    while i < len(steps):
        if not isinstance(node, dict):
            return default
        for name, j in steps[i]:  # the longest dotted key present at this level wins
            if name in node:
                node, i = node[name], j
                break
        else:
            return default
    if isinstance(node, dict) and isinstance(default, bool):
        node = node.get("enabled", default)  # "reminders": {"enabled": false, "max": 2}
    return node if node is not None else default


def _bool(settings: Any, key: str, default: bool) -> bool:
    value = setting(settings, key, default)
    return value if isinstance(value, bool) else default


class SessionTodos:
    def __init__(self, *, emit: Callable[[dict[str, Any]], None], append_entry: Callable[[str, Any], Any],
                 branch: Callable[[], list[Any]], settings: Any = None) -> None:
        self._emit = emit
        self._append_entry = append_entry
        self._branch = branch
        self._settings = settings
        self.list = TodoList()
        self.attempts = 0  # reminders sent since the last user prompt
        self.restore(announce=False)

    # -- settings -----------------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        return _bool(self._settings, "todo.enabled", True)

    @property
    def reminders_enabled(self) -> bool:
        return self.enabled and _bool(self._settings, "todo.reminders", True)

    @property
    def max_reminders(self) -> int:
        value = setting(self._settings, "todo.reminders.max", DEFAULT_MAX_REMINDERS)
        if isinstance(value, dict):
            value = value.get("max", DEFAULT_MAX_REMINDERS)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            return DEFAULT_MAX_REMINDERS
        return int(value)

    # -- reading ------------------------------------------------------------------------------------
    @property
    def phases(self) -> list[dict[str, Any]]:
        return self.list.snapshot()

    # -- changes ------------------------------------------------------------------------------------
    def apply_ops(self, ops: Any) -> tuple[list[str], list[dict[str, Any]]]:
        """``todo_write``: apply the operations (all or nothing), persist, announce. Returns the notes of each
        operation and the new phases; raises TodoError (nothing changed) on a bad operation."""
        self._require_enabled()
        notes = self.list.apply(ops)
        self._changed("tool")
        return notes, self.phases

    def set_phases(self, phases: Any) -> list[dict[str, Any]]:
        """``set_todos``: replace the list (ids assigned where absent), persist, announce."""
        self._require_enabled()
        if phases is None:
            phases = []
        self.list.load(phases)
        self._changed("rpc")
        return self.phases

    def _require_enabled(self) -> None:
        if not self.enabled:
            raise TodoError("todos are turned off (setting todo.enabled is false)")

    def _changed(self, source: str) -> None:
        phases = self.phases
        self._append_entry(ENTRY_TYPE, {"phases": phases, **self.list.counters()})
        self._emit({"type": "todo_update", "todoPhases": phases, "source": source})

    def restore(self, announce: bool = True) -> None:
        """The list as last written on the current branch (empty when none was)."""
        data: Any = {}
        for entry in reversed(self._branch()):
            if entry_type(entry) == "custom" and getattr(entry, "customType", None) == ENTRY_TYPE:
                data = getattr(entry, "data", None)
                break
        found = data.get("phases") if isinstance(data, dict) else []
        before = self.list.phases
        try:
            self.list = TodoList(found if isinstance(found, list) else [], data)
        except TodoError:  # a hand-edited file: an empty list rather than a session that does not open
            self.list = TodoList()
        if announce and self.list.phases != before:
            self._emit({"type": "todo_update", "todoPhases": self.phases, "source": "restore"})

    # -- fed by the session -------------------------------------------------------------------------
    def on_event(self, event: Any) -> None:
        if isinstance(event, dict):
            if event.get("type") == "session_changed":
                self.attempts = 0
                self.restore()
        elif isinstance(event, MessageStartEvent):
            if isinstance(event.message, UserMessage):
                self.attempts = 0  # a new user prompt (or steering): the reminders start over

    def reminder(self, last: Any) -> CustomMessage | None:
        """After a run: the reminder to continue with (and the ``todo_reminder`` event), or None to stop."""
        if not self.reminders_enabled or last is None or getattr(last, "stopReason", None) != "stop":
            return None
        todos = self.list.incomplete()
        if not todos or self.attempts >= self.max_reminders:
            return None
        self.attempts += 1
        limit = self.max_reminders
        self._emit({"type": "todo_reminder", "todos": todos, "attempt": self.attempts, "maxAttempts": limit})
        listed = "\n".join(f"- {t['id']} [{t['status']}] {t['content']}" for t in todos)
        text = (f"<system-reminder>You stopped with {len(todos)} incomplete todo item(s):\n{listed}\n"
                "Continue with the next item, or update the list with todo_write (mark items completed or "
                f"abandoned) if they are done or no longer needed. (Reminder {self.attempts}/{limit})"
                "</system-reminder>")
        return CustomMessage(customType=REMINDER_TYPE, content=text, display=True,
                             details={"todos": todos, "attempt": self.attempts, "maxAttempts": limit})

    def summary(self) -> str:
        return render(self.list.phases)


def plan_continue_in(settings: Any) -> str:
    """Setting ``plan.continueIn``: where an approved plan is carried out, ``same`` (default) or ``new``
    (here so that ``get_state`` can show it without loading plan mode's module)."""
    value = setting(settings, "plan.continueIn", "same")
    return value if value in ("same", "new") else "same"


def todos_enabled(settings: Any) -> bool:
    """Setting ``todo.enabled`` (default true): without it no list, no tool, no ``todoPhases``."""
    return _bool(settings, "todo.enabled", True)


def attach(session: Any) -> SessionTodos:
    """Give ``session`` a todo list (``session.todos``), wired to its events, its file and its settings."""
    todos = SessionTodos(emit=session.emit,
                         append_entry=lambda kind, data: session.store.append_custom_entry(kind, data),
                         branch=lambda: session.store.get_branch(), settings=session.settings)
    session.todos = todos
    return todos
