"""The todo list: phases of tasks, changed by ``todo_write`` operations or ``set_todos``.

``TodoList`` is pure data (no I/O): phases ``{id, name, tasks}`` and tasks ``{id, content, status, details?,
notes?}`` with the statuses ``pending | in_progress | completed | abandoned``. What it guarantees:

* every change is all or nothing: a bad operation raises ``TodoError`` and leaves the list as it was;
* ids are stable: a task keeps its id (``t1``, ``t2``, ...) for the life of the list, and an id is never reused
  for another task, so ``update`` and ``remove_task`` address one item (phases are ``p1``, ``p2``, ...);
* after every change at most one task is ``in_progress``: when several are, the first keeps it and the others
  go back to ``pending``; when none is and some task is pending, the first pending task is promoted
  (oh-my-pi's rule, so the model always has a current item).

``SessionTodos`` (in ``session_todos``) connects a list to a session.
"""

from __future__ import annotations

from typing import Any

STATUSES = ("pending", "in_progress", "completed", "abandoned")
OPS = ("replace", "add_phase", "add_task", "update", "remove_task")
MAX_TASKS = 500  # a list is for a person to read: far more than that is a runaway loop, refused
MAX_TEXT = 4000  # characters of one content, details or notes field

_TASK_FIELDS = ("content", "status", "details", "notes")


class TodoError(ValueError):
    """A todo operation that cannot be applied; the message says which and why."""


def _text(value: Any, what: str, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise TodoError(f"{what} must be a non-empty string")
    if len(value) > MAX_TEXT:
        raise TodoError(f"{what} is longer than {MAX_TEXT} characters")
    return value


def _status(value: Any, what: str) -> str:
    if value is None:
        return "pending"
    if value not in STATUSES:
        raise TodoError(f"{what}: invalid status {value!r}; use one of {', '.join(STATUSES)}")
    return str(value)


class TodoList:
    def __init__(self, phases: list[dict[str, Any]] | None = None, counters: Any = None) -> None:
        self.phases: list[dict[str, Any]] = []
        self._next_task = 1
        self._next_phase = 1
        if isinstance(counters, dict):  # the next ids, as saved: an id removed before a resume stays unused
            for key, attr in (("nextTaskId", "_next_task"), ("nextPhaseId", "_next_phase")):
                value = counters.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10**9:
                    setattr(self, attr, value)
        if phases:
            self.load(phases)

    def counters(self) -> dict[str, int]:
        return {"nextTaskId": self._next_task, "nextPhaseId": self._next_phase}

    # -- reading ------------------------------------------------------------------------------------
    def snapshot(self) -> list[dict[str, Any]]:
        """A deep copy of the phases (what get_state, events and the session file carry)."""
        return [{**p, "tasks": [dict(t) for t in p["tasks"]]} for p in self.phases]  # values are strings

    def tasks(self) -> list[dict[str, Any]]:
        return [t for p in self.phases for t in p["tasks"]]

    def incomplete(self) -> list[dict[str, Any]]:
        """Tasks still pending or in progress, each with the name of its phase."""
        return [{**t, "phase": p["name"]} for p in self.phases for t in p["tasks"]
                if t["status"] in ("pending", "in_progress")]

    # -- whole-list changes ---------------------------------------------------------------------------
    def load(self, phases: Any) -> None:
        """Replace the list with ``phases`` (``[{name, tasks: [{content, status?}]}]``); ids are kept when
        given and unique, assigned when absent."""
        self._commit(lambda work: work._replace(phases))

    def apply(self, ops: Any) -> list[str]:
        """Apply ``todo_write`` operations in order, all or nothing. Returns one line per operation."""
        if not isinstance(ops, list) or not ops:
            raise TodoError("'ops' must be a non-empty array of operations")
        notes: list[str] = []

        def run(work: TodoList) -> None:
            for i, op in enumerate(ops):
                if not isinstance(op, dict):
                    raise TodoError(f"ops[{i}] must be an object")
                kind = op.get("op")
                if kind not in OPS:
                    raise TodoError(f"ops[{i}]: unknown op {kind!r}; use one of {', '.join(OPS)}")
                notes.append(getattr(work, "_op_" + kind)(op, f"ops[{i}] ({kind})"))

        self._commit(run)
        return notes

    def _commit(self, change: Any) -> None:
        work = TodoList()
        work.phases, work._next_task, work._next_phase = self.snapshot(), self._next_task, self._next_phase
        change(work)
        work._normalize()
        if len(work.tasks()) > MAX_TASKS:
            raise TodoError(f"a todo list holds at most {MAX_TASKS} tasks")
        self.phases, self._next_task, self._next_phase = work.phases, work._next_task, work._next_phase

    # -- operations (on a working copy) ---------------------------------------------------------------
    def _replace(self, phases: Any, what: str = "phases") -> None:
        if not isinstance(phases, list):
            raise TodoError(f"{what} must be an array of {{name, tasks}}")
        taken = {t.get("id") for p in phases if isinstance(p, dict)
                 for t in (p.get("tasks") or []) if isinstance(t, dict)}
        self._bump_counters(taken, {p.get("id") for p in phases if isinstance(p, dict)})
        self.phases = []
        seen: set[str] = set()
        for i, phase in enumerate(phases):
            self._add_phase(phase, f"{what}[{i}]", seen)

    def _add_phase(self, phase: Any, what: str, seen: set[str] | None = None) -> dict[str, Any]:
        if not isinstance(phase, dict):
            raise TodoError(f"{what} must be an object {{name, tasks}}")
        name = _text(phase.get("name"), f"{what}.name")
        pid = phase.get("id")
        if not isinstance(pid, str) or not pid or any(p["id"] == pid for p in self.phases):
            pid = f"p{self._next_phase}"
            self._next_phase += 1
        entry: dict[str, Any] = {"id": pid, "name": name, "tasks": []}
        self.phases.append(entry)
        tasks = phase.get("tasks") or []
        if not isinstance(tasks, list):
            raise TodoError(f"{what}.tasks must be an array")
        seen = set() if seen is None else seen
        for j, task in enumerate(tasks):
            entry["tasks"].append(self._new_task(task, f"{what}.tasks[{j}]", seen))
        return entry

    def _new_task(self, task: Any, what: str, seen: set[str]) -> dict[str, Any]:
        if isinstance(task, str):
            task = {"content": task}
        if not isinstance(task, dict):
            raise TodoError(f"{what} must be an object {{content, status?}}")
        out: dict[str, Any] = {"id": "", "content": _text(task.get("content"), f"{what}.content"),
                               "status": _status(task.get("status"), what)}
        for key in ("details", "notes"):
            value = _text(task.get(key), f"{what}.{key}", required=False)
            if value is not None:
                out[key] = value
        tid = task.get("id")
        if not isinstance(tid, str) or not tid or tid in seen or any(t["id"] == tid for t in self.tasks()):
            tid = f"t{self._next_task}"
            self._next_task += 1
        seen.add(tid)
        out["id"] = tid
        return out

    def _bump_counters(self, task_ids: set[Any], phase_ids: set[Any]) -> None:
        for ids, attr, prefix in ((task_ids, "_next_task", "t"), (phase_ids, "_next_phase", "p")):
            for value in ids:
                digits = value[1:] if isinstance(value, str) and value.startswith(prefix) else ""
                if digits.isascii() and digits.isdigit() and len(digits) <= 9:
                    setattr(self, attr, max(getattr(self, attr), int(digits) + 1))

    def _find_phase(self, ref: Any, what: str) -> dict[str, Any]:
        if ref is None:
            if not self.phases:
                raise TodoError(f"{what}: there is no phase yet; add one with add_phase (or use replace)")
            return self.phases[-1]
        for p in self.phases:
            if ref in (p["id"], p["name"]):
                return p
        known = ", ".join(f"{p['id']} {p['name']}" for p in self.phases)
        raise TodoError(f"{what}: no phase {ref!r}; phases: {known}")

    def _find_task(self, ref: Any, what: str) -> tuple[dict[str, Any], dict[str, Any]]:
        if not isinstance(ref, str) or not ref:
            raise TodoError(f"{what}: 'id' must be a task id (t1, t2, ...)")
        for p in self.phases:
            for t in p["tasks"]:
                if t["id"] == ref:
                    return p, t
        raise TodoError(f"{what}: no task {ref!r}")

    def _op_replace(self, op: dict[str, Any], what: str) -> str:
        self._replace(op.get("phases"), f"{what}.phases")
        return f"replaced the list: {len(self.phases)} phase(s), {len(self.tasks())} task(s)"

    def _op_add_phase(self, op: dict[str, Any], what: str) -> str:
        phase = self._add_phase({"name": op.get("name"), "tasks": op.get("tasks")}, what)
        return f"added phase {phase['id']} {phase['name']!r} with {len(phase['tasks'])} task(s)"

    def _op_add_task(self, op: dict[str, Any], what: str) -> str:
        phase = self._find_phase(op.get("phase"), what)
        task = self._new_task({k: op.get(k) for k in _TASK_FIELDS}, what, set())
        phase["tasks"].append(task)
        return f"added task {task['id']} to {phase['id']}"

    def _op_update(self, op: dict[str, Any], what: str) -> str:
        _, task = self._find_task(op.get("id"), what)
        changed = []
        for key in _TASK_FIELDS:
            if op.get(key) is None:
                continue
            task[key] = _status(op[key], what) if key == "status" else _text(op[key], f"{what}.{key}")
            changed.append(key)
        if not changed:
            raise TodoError(f"{what}: nothing to update; give status, content, details or notes")
        if task["status"] == "in_progress":  # the one the model names wins over the one in progress before
            for other in self.tasks():
                if other is not task and other["status"] == "in_progress":
                    other["status"] = "pending"
        return f"updated {task['id']} ({', '.join(changed)})"

    def _op_remove_task(self, op: dict[str, Any], what: str) -> str:
        phase, task = self._find_task(op.get("id"), what)
        phase["tasks"].remove(task)
        return f"removed {task['id']}"

    def _normalize(self) -> None:
        current = [t for t in self.tasks() if t["status"] == "in_progress"]
        for t in current[1:]:
            t["status"] = "pending"
        if not current:
            first = next((t for t in self.tasks() if t["status"] == "pending"), None)
            if first is not None:
                first["status"] = "in_progress"


_MARK = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]", "abandoned": "[-]"}


def render(phases: list[dict[str, Any]]) -> str:
    """The list as the model and a person read it: one line per phase and per task, with its id."""
    if not phases:
        return "The todo list is empty."
    lines = []
    for p in phases:
        lines.append(f"{p['id']} {p['name']}")
        for t in p["tasks"]:
            line = f"  {_MARK.get(t['status'], '[?]')} {t['id']} {t['content']}"
            if t["status"] == "in_progress" and t.get("details"):
                line += f"\n      {t['details']}"
            if t.get("notes"):
                line += f"\n      notes: {t['notes']}"
            lines.append(line)
    return "\n".join(lines)
