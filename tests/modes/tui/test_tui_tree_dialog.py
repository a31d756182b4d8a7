"""The tree dialog on the host's flat ``get_tree``: a long session (deeper than Python's JSON decoder goes
nested) opens and moves without recursion; filters, search, fold and branch marks on a branched tree."""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "e2e"))

import e2eproc  # noqa: E402 - after the path

from pisces.modes.tui.render import visible  # noqa: E402 - after the path
from pisces.modes.tui.tree_dialog import TreeDialog  # noqa: E402 - after the path

home, spawn = e2eproc.home, e2eproc.spawn  # the fixtures of the e2e tests
USAGE = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
         "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def _long_session(path: str, cwd: str, turns: int) -> None:
    lines = [{"type": "session", "version": 3, "id": "0badc0de-0000-4000-8000-000000000001",
              "timestamp": "2026-11-22T01:37:33.598Z", "cwd": cwd}]
    parent = None
    for i in range(2 * turns):
        ident = f"e{i:07d}"
        if i % 2 == 0:
            message = {"role": "user", "content": [{"type": "text", "text": f"question {i // 2}"}],
                       "timestamp": 1795311453000 + i}
        else:
            message = {"role": "assistant", "content": [{"type": "text", "text": f"answer {i // 2}"}],
                       "api": "faux", "provider": "faux", "model": "faux", "usage": USAGE, "stopReason": "stop",
                       "timestamp": 1795311453000 + i}
        lines.append({"type": "message", "id": ident, "parentId": parent,
                      "timestamp": "2026-11-22T01:37:33.633Z", "message": message})
        parent = ident
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))


class FakeApp:
    def __init__(self) -> None:
        self.dialog = None
        self.notes: list[str] = []
        self.transcript = self
        self.hint = ""

    def schedule(self) -> None:
        pass

    def note(self, text: str, *codes: int) -> None:
        self.notes.append(text)


def _rows(view: TreeDialog) -> list[str]:
    return [visible(r) for r in view.rows(100)]


def test_a_long_session_opens_in_the_tree_without_recursion(home, spawn, tmp_path):
    path = str(tmp_path / "long.jsonl")
    _long_session(path, home.cwd, 3000)  # 6000 entries: nested, 12000 levels of JSON
    p = spawn("--session", path)
    raw = p.request({"type": "get_tree", "flat": True})  # decoded by Python's json, which stops near 1000
    assert raw["success"], raw
    data = raw["data"]
    assert len(data["nodes"]) >= 6000 and data["leafId"] == data["nodes"][-1]["id"]  # (+ settings entries)
    assert all("children" not in n for n in data["nodes"])
    view = TreeDialog(FakeApp(), data)
    rows = _rows(view)
    assert any("assistant: answer 2999  ← active" in r for r in rows)
    view.key("pageup", "")
    view.key("up", "")
    assert view.cursor == "e0005988"
    for ch in "question 1234":
        view.key(ch, ch)
    shown = [r for r in _rows(view) if r.startswith("│ ")]
    assert [r.split("user: ")[1] for r in shown] == ["question 1234"]  # every typed word, in one entry
    assert view.cursor == "e0002468"  # the cursor went to the one that matches
    view.key("escape", "")
    view.key("ctrl+u", "")
    assert all("assistant:" not in r for r in _rows(view))


def test_flat_and_nested_get_tree_hold_the_same_nodes(home, spawn):
    p = spawn("--faux-script", home.faux_script([{"text": "one"}, {"text": "two"}, {"text": "three"}]))
    for text in ("first", "second"):
        p.ok({"type": "prompt", "message": text})
        p.until_type("agent_settled", 30)
    first = p.ok({"type": "get_fork_messages"})["messages"][0]["entryId"]
    p.ok({"type": "navigate_tree", "targetId": first})
    p.ok({"type": "prompt", "message": "first again"})
    p.until_type("agent_settled", 30)
    nested = p.ok({"type": "get_tree"})
    flat = p.ok({"type": "get_tree", "flat": True})
    walked, stack = [], list(nested["tree"])
    while stack:
        n = stack.pop()
        stack.extend(n.pop("children"))
        walked.append(n)
    assert sorted(walked, key=lambda n: n["id"]) == sorted(flat["nodes"], key=lambda n: n["id"])
    assert flat["leafId"] == nested["leafId"]
    view = TreeDialog(FakeApp(), flat)
    rows = _rows(view)
    body = "\n".join(rows)
    assert "├ user: first" in body and "└ user: first again" in body  # two branches from one point
    assert "assistant: three  ← active" in body
    view.key("up", "")  # on "first again"
    view.key("ctrl+left", "")  # fold it
    body = "\n".join(_rows(view))
    assert "▸ user: first again (+1)" in body and "three" not in body


def test_a_view_never_hides_a_dialog_that_arrived_first():
    app = FakeApp()
    approval = {"id": "a1", "method": "approval", "options": ["Allow once"], "index": 0}
    app.dialog = approval  # an approval came while get_tree was on its way
    view = TreeDialog(app, {"nodes": [{"id": "x", "parentId": None, "type": "message", "role": "user",
                                       "preview": "hi"}], "leafId": "x"})
    assert view.open() is False
    assert app.dialog is approval and "answer it first" in app.notes[-1]
    app.dialog = None
    assert view.open() is True and app.dialog["view"] is view
    view.key("escape", "")
    assert app.dialog is None
