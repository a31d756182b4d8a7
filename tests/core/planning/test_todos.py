"""The todo list's rules without a session: ids stable and never reused, exactly one task in progress, every
change all or nothing, the size bounds, and settings read nested or flat."""

from __future__ import annotations

import pytest

from pisces.core.planning.session_todos import SessionTodos, setting
from pisces.core.planning.todos import MAX_TASKS, TodoError, TodoList


def states(todo: TodoList) -> list[tuple[str, str]]:
    return [(t["id"], t["status"]) for t in todo.tasks()]


def test_ids_are_stable_and_never_reused():
    todo = TodoList()
    todo.apply([{"op": "replace", "phases": [{"name": "A", "tasks": [{"content": "a"}, {"content": "b"}]}]}])
    todo.apply([{"op": "remove_task", "id": "t2"}, {"op": "add_task", "content": "c"}])
    assert [t["id"] for t in todo.tasks()] == ["t1", "t3"]
    resumed = TodoList(todo.snapshot(), todo.counters())
    resumed.apply([{"op": "add_phase", "name": "B", "tasks": [{"content": "d"}]}])
    assert [t["id"] for t in resumed.tasks()] == ["t1", "t3", "t4"]
    assert [p["id"] for p in resumed.phases] == ["p1", "p2"]


def test_exactly_one_in_progress():
    todo = TodoList([{"name": "A", "tasks": [{"content": "a", "status": "in_progress"},
                                             {"content": "b", "status": "in_progress"}, {"content": "c"}]}])
    assert states(todo) == [("t1", "in_progress"), ("t2", "pending"), ("t3", "pending")]
    todo.apply([{"op": "update", "id": "t3", "status": "in_progress"}])
    assert states(todo) == [("t1", "pending"), ("t2", "pending"), ("t3", "in_progress")]
    todo.apply([{"op": "update", "id": "t3", "status": "completed"}])
    assert states(todo) == [("t1", "in_progress"), ("t2", "pending"), ("t3", "completed")]  # first pending promoted
    todo.apply([{"op": "update", "id": t, "status": "abandoned"} for t in ("t1", "t2")])
    assert [s for _, s in states(todo)] == ["abandoned", "abandoned", "completed"]  # nothing left to promote


@pytest.mark.parametrize("ops, needle", [
    ([{"op": "update", "id": "t1", "status": "completed"}, {"op": "frobnicate"}], "unknown op"),
    ([{"op": "update", "id": "t1", "status": "done"}], "invalid status"),
    ([{"op": "update", "id": "t1"}], "nothing to update"),
    ([{"op": "add_task", "phase": "Z", "content": "x"}], "no phase 'Z'"),
    ([{"op": "add_task", "content": ""}], "content"),
    ([], "non-empty array"),
    ("replace", "non-empty array"),
])
def test_a_bad_operation_changes_nothing(ops, needle):
    todo = TodoList([{"name": "A", "tasks": [{"content": "a"}]}])
    before = todo.snapshot()
    with pytest.raises(TodoError, match=needle):
        todo.apply(ops)
    assert todo.snapshot() == before


def test_bounds():
    with pytest.raises(TodoError, match="at most"):
        TodoList([{"name": "A", "tasks": [{"content": "x"}] * (MAX_TASKS + 1)}])
    with pytest.raises(TodoError, match="longer than"):
        TodoList([{"name": "A", "tasks": [{"content": "x" * 5000}]}])


class FakeSettings:
    def __init__(self, data: dict) -> None:
        self.data = data

    def as_dict(self) -> dict:
        return self.data


@pytest.mark.parametrize("data, enabled, reminders, maximum", [
    ({}, True, True, 3),
    ({"todo": {"reminders": {"max": 5}}}, True, True, 5),
    ({"todo.reminders": False, "todo.reminders.max": 1}, True, False, 1),
    ({"todo": {"enabled": False}}, False, False, 3),
    ({"todo": {"reminders.max": "many"}}, True, True, 3),
])
def test_settings_nested_or_flat(data, enabled, reminders, maximum):
    todos = SessionTodos(emit=lambda e: None, append_entry=lambda k, d: None, branch=list,
                         settings=FakeSettings(data))
    assert (todos.enabled, todos.reminders_enabled, todos.max_reminders) == (enabled, reminders, maximum)
    assert setting(FakeSettings(data), "todo.missing", 7) == 7
