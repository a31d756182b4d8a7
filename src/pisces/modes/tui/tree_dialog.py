"""``/tree`` (and Esc twice on an empty editor while idle): the session's tree as a dialog, as pi's.

Keys: Up/Down move; Left/Right or PageUp/PageDown page; Ctrl+Left/Alt+Left fold the branch under the cursor
(or go up to its branch point), Ctrl+Right/Alt+Right unfold (or go to the next branch point); typing searches
(every word must occur in the entry or its label), Backspace edits the search; Ctrl+U toggles user messages
only, Ctrl+O cycles the filters (default, no-tools, user-only, labeled-only, all); Shift+L sets or clears
the label of the entry under the cursor; Enter moves there, asking whether to summarize the branch being left;
Esc clears the search, then closes.

Everything it shows comes from the host's ``get_tree`` (its flat form: a nested tree of a long session is too
deep for Python's JSON decoder); it acts through ``navigate_tree`` and
``set_entry_label`` (no second dispatcher). Flattening is iterative, so a session of tens of thousands of
entries neither recurses nor costs more than one walk per key.
"""

from __future__ import annotations

from typing import Any

from pisces.modes.tui.render import style
from pisces.modes.tui.sanitize import clean
from pisces.modes.tui.views import VISIBLE, View, list_rows, matches, window_rows

FILTERS = ("default", "no-tools", "user-only", "labeled-only", "all")
SUMMARY_CHOICES = ("Go there (no summary)", "Summarize the branch being left",
                   "Summarize with instructions…")
MAX_INDENT = 12  # levels of indentation drawn; deeper branches stay at this depth
_ROLE = {"user": "user", "assistant": "assistant", "bashExecution": "bash", "branchSummary": "branch summary",
         "compactionSummary": "compaction", "custom": "custom"}


def describe(node: dict[str, Any]) -> str:
    """What an entry is, in a few words, before its preview."""
    kind = node.get("type")
    if kind == "message":
        return _ROLE.get(str(node.get("role")), str(node.get("role")))
    if kind == "tool_result":
        return f"{node.get('toolName')} result"
    if kind == "model_change":
        return f"model {node.get('provider')}/{node.get('modelId')}"
    if kind == "thinking_level_change":
        return f"thinking {node.get('thinkingLevel')}"
    if kind == "branch_summary":
        return "branch summary"
    return str(kind)


def _text(node: dict[str, Any]) -> str:
    return str(node.get("preview") or node.get("summary") or "")


class TreeDialog(View):
    title = "session tree"

    def __init__(self, app: Any, data: dict[str, Any]) -> None:
        super().__init__(app)
        self.filter = "default"
        self.query = ""
        self.folded: set[str] = set()
        self.mode = "browse"  # or "label", "summary", "instructions"
        self.input = ""
        self.choice = 0
        self.target: dict[str, Any] | None = None
        self.cursor: str | None = None
        self.load(data)
        self.cursor = self.leaf

    # -- the tree ----------------------------------------------------------------------------------------
    def load(self, data: dict[str, Any]) -> None:
        """``get_tree {"flat": true}``'s nodes (file order, each naming its parent) linked into a tree."""
        self.leaf: str | None = data.get("leafId")
        self._loads = getattr(self, "_loads", 0) + 1
        self._flat_key: tuple[Any, ...] | None = None
        self._flat: list[tuple[dict[str, Any], str, int]] = []
        self._pos: dict[str, int] = {}
        self.by_id: dict[str, dict[str, Any]] = {}
        self.parent: dict[str, str | None] = {}
        self.roots: list[dict[str, Any]] = []
        for raw in data.get("nodes") or []:
            n = {**raw, "children": []}
            self.by_id[n["id"]] = n
            owner = self.by_id.get(n.get("parentId") or "")
            if owner is not None:
                owner["children"].append(n)
                self.parent[n["id"]] = owner["id"]
            else:
                self.roots.append(n)
        self.active: set[str] = set()
        at = self.leaf
        while at is not None:
            self.active.add(at)
            at = self.parent.get(at)

    def shows(self, n: dict[str, Any]) -> bool:
        kind, role = n.get("type"), n.get("role")
        f = self.filter
        if f == "user-only" and not (kind == "message" and role == "user"):
            return False
        if f == "labeled-only" and not n.get("label"):
            return False
        if f in ("default", "no-tools") and kind in ("model_change", "thinking_level_change"):
            return False
        if f == "no-tools" and (kind == "tool_result" or str(n.get("preview", "")).startswith("[tool calls:")):
            return False
        if self.query:
            return matches(self.query, f"{describe(n)} {_text(n)} {n.get('label') or ''}")
        return True

    def _visible_under(self, children: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The nearest shown entries below ``children`` (a hidden entry hands its place to its children)."""
        out: list[dict[str, Any]] = []
        stack = list(reversed(children))
        while stack:
            n = stack.pop()
            if self.shows(n):
                out.append(n)
            else:
                stack.extend(reversed(n.get("children") or []))
        return out

    def flatten(self) -> list[tuple[dict[str, Any], str, int]]:
        """Rows in depth-first order: (entry, its guide and branch mark, number of shown children). Kept
        until the filter, the search, the folds or the tree change (moving the cursor costs no walk)."""
        key = (self.filter, self.query, tuple(sorted(self.folded)), self._loads)
        if key != self._flat_key:
            self._flat = self._flatten()
            self._pos = {r[0]["id"]: i for i, r in enumerate(self._flat)}
            self._flat_key = key
        return self._flat

    def _flatten(self) -> list[tuple[dict[str, Any], str, int]]:
        rows: list[tuple[dict[str, Any], str, int]] = []
        stack: list[tuple[dict[str, Any], str, str]] = []
        self._push(stack, self._visible_under(self.roots), "")
        while stack:
            n, prefix, guide = stack.pop()
            kids = self._visible_under(n.get("children") or [])
            rows.append((n, prefix, len(kids)))
            if n["id"] not in self.folded:
                self._push(stack, kids, guide)
        return rows

    @staticmethod
    def _push(stack: list[tuple[dict[str, Any], str, str]], kids: list[dict[str, Any]], guide: str) -> None:
        """A single child continues its parent's line; several open one branch each (├ … └)."""
        if len(kids) == 1:
            stack.append((kids[0], guide, guide))
            return
        if len(guide) >= 2 * MAX_INDENT:
            guide = guide[2:]
        for i in range(len(kids) - 1, -1, -1):
            last = i == len(kids) - 1
            stack.append((kids[i], guide + ("└ " if last else "├ "), guide + ("  " if last else "│ ")))

    # -- drawing -----------------------------------------------------------------------------------------
    def rows(self, width: int) -> list[str]:
        flat = self.flatten()
        at = self._index(flat)
        head = [style(f"┌ session tree · filter: {self.filter}" + (f" · search: {self.query}█" if self.query
                                                                      else ""), 1, 35)]
        if self.mode == "summary" and self.target is not None:
            head.append(style("│ moving to: " + clean(_text(self.target))[:80], 35))
            return head + list_rows(list(SUMMARY_CHOICES), self.choice) + [
                style("└ ↑/↓ choose · Enter go · Esc back", 2)]
        if self.mode in ("label", "instructions"):
            what = "label" if self.mode == "label" else "summary instructions"
            return head + ["│ " + what + ": " + self.input + "█",
                           style("└ Enter save · Esc back" if self.mode == "label" else
                                 "└ Enter summarize and go · Esc back", 2)]
        shown = self._pos
        here = self.leaf  # where the session is; a hidden leaf is marked on its nearest shown ancestor
        while here is not None and here not in shown and not self.query:
            here = self.parent.get(here)

        def label(i: int) -> str:
            n, prefix, kids = flat[i]
            fold = ("▸ " if n["id"] in self.folded else "") if kids else ""
            tag = style(f"[{clean(str(n['label']))}] ", 33) if n.get("label") else ""
            where = style("  ← active", 32) if n["id"] == here else ""
            dot = "•" if n["id"] in self.active else " "
            hidden = style(f" (+{self._count(n) - 1})", 2) if n["id"] in self.folded else ""
            text = clean(_text(n))[:max(10, width - 30 - len(prefix))]
            return f"{dot} {prefix}{fold}{tag}{style(describe(n) + ':', 2)} {text}{hidden}{where}"
        rows = head + (window_rows(len(flat), at, label) if flat else [style("│   (no entry matches)", 2)])
        rows.append(style("└ ↑/↓ move · type search · ^U user · ^O filter · ^←/^→ fold · L label · "
                          "Enter go · Esc close", 2))
        return rows

    def _count(self, n: dict[str, Any]) -> int:
        total, stack = 0, [n]
        while stack:
            x = stack.pop()
            total += 1
            stack.extend(x.get("children") or [])
        return total

    def _index(self, flat: list[tuple[dict[str, Any], str, int]]) -> int:
        pos = self._pos
        if self.cursor in pos:
            return pos[self.cursor]
        at = self.cursor  # the cursor's entry is hidden: its nearest shown ancestor, else the first row
        while at is not None and at not in pos:
            at = self.parent.get(at)
        self.cursor = at if at is not None else (flat[0][0]["id"] if flat else None)
        return pos.get(self.cursor or "", 0)

    # -- keys --------------------------------------------------------------------------------------------
    def key(self, name: str, data: str) -> None:
        if self.mode == "summary":
            self._summary_key(name)
        elif self.mode in ("label", "instructions"):
            self._input_key(name, data)
        else:
            self._browse_key(name, data)

    def _browse_key(self, name: str, data: str) -> None:
        flat = self.flatten()
        at = self._index(flat)
        move = {"up": -1, "down": 1, "left": -VISIBLE, "pageup": -VISIBLE, "right": VISIBLE,
                "pagedown": VISIBLE}.get(name)
        if name == "escape":
            if self.query:
                self.query = ""
            else:
                self.close()
        elif move is not None and flat:
            self.cursor = flat[max(0, min(len(flat) - 1, at + move))][0]["id"]
        elif name in ("ctrl+left", "alt+left") and flat:
            n, _prefix, kids = flat[at]
            if kids and n["id"] not in self.folded:
                self.folded.add(n["id"])
            else:  # up to the branch point above
                for i in range(at - 1, -1, -1):
                    if flat[i][2] > 1:
                        self.cursor = flat[i][0]["id"]
                        break
        elif name in ("ctrl+right", "alt+right") and flat:
            n = flat[at][0]
            if n["id"] in self.folded:
                self.folded.discard(n["id"])
            else:
                for i in range(at + 1, len(flat)):
                    if flat[i][2] > 1:
                        self.cursor = flat[i][0]["id"]
                        break
        elif name == "ctrl+u":
            self.filter = "default" if self.filter == "user-only" else "user-only"
        elif name == "ctrl+o":
            self.filter = FILTERS[(FILTERS.index(self.filter) + 1) % len(FILTERS)]
        elif name == "backspace":
            self.query = self.query[:-1]
        elif name == "<bracketed-paste>":
            self.query += " ".join(data.split())
        elif name == "enter" and flat:
            self.target = flat[at][0]
            if self.target["id"] == self.leaf:
                self.app.transcript.note("already at that entry", 2)
                self.close()
            else:
                self.mode, self.choice = "summary", 0
        elif data == "L" and flat:
            self.target = flat[at][0]
            self.mode, self.input = "label", str(self.target.get("label") or "")
        elif len(data) == 1 and data.isprintable() and name not in ("enter", "tab"):
            self.query += data

    def _summary_key(self, name: str) -> None:
        if name == "escape":
            self.mode = "browse"
        elif name in ("up", "down"):
            self.choice = (self.choice + (1 if name == "down" else -1)) % len(SUMMARY_CHOICES)
        elif name == "enter":
            if self.choice == 2:
                self.mode, self.input = "instructions", ""
            else:
                self._go(summarize=self.choice == 1, instructions=None)

    def _input_key(self, name: str, data: str) -> None:
        if name == "escape":
            self.mode = "browse" if self.mode == "label" else "summary"
        elif name == "enter":
            if self.mode == "label":
                self.mode = "browse"
                self.run(self._label(self.input.strip()))
            else:
                self._go(summarize=True, instructions=self.input.strip() or None)
        elif name == "backspace":
            self.input = self.input[:-1]
        elif name == "<bracketed-paste>" or (len(data) == 1 and data.isprintable()):
            self.input += data.replace("\n", " ")

    # -- acting through the host -------------------------------------------------------------------------
    async def _label(self, label: str) -> None:
        assert self.target is not None
        await self.ask({"type": "set_entry_label", "targetId": self.target["id"], "label": label or None})
        self.load(await self.ask({"type": "get_tree", "flat": True}))

    def _go(self, *, summarize: bool, instructions: str | None) -> None:
        target = self.target
        assert target is not None
        self.close()
        self.run(self._navigate(target, summarize, instructions))

    async def _navigate(self, target: dict[str, Any], summarize: bool, instructions: str | None) -> None:
        from pisces.modes.tui.history import rebuild  # noqa: PLC0415 - loaded with the first move

        app = self.app
        if summarize:
            app.hint = "summarizing the branch being left…"
            app.schedule()
        cmd: dict[str, Any] = {"type": "navigate_tree", "targetId": target["id"], "summarize": summarize}
        if instructions:
            cmd["customInstructions"] = instructions
        try:
            data = await self.ask(cmd)
        finally:
            app.hint = ""
        if data.get("cancelled"):
            app.transcript.note("the move was cancelled (by an extension)", 33)
            return
        app.transcript.note(f"── moved to: {describe(target)}: {clean(_text(target))[:70]}"
                            + (" (the branch left was summarized)" if summarize else ""), 2)
        await rebuild(app, clear=False)
        text = data.get("editorText")
        if text and not app.editor.text:
            app.editor.text = text
            app.editor.cursor_position = len(text)
        await app.refresh_state()


async def open_tree(app: Any) -> None:
    resp = await app.client.request({"type": "get_tree", "flat": True})
    if not resp.get("success"):
        raise RuntimeError(resp.get("error", "get_tree failed"))
    data = resp.get("data") or {}
    if not data.get("nodes"):
        app.transcript.note("the session has no entries yet", 2)
        return
    TreeDialog(app, data).open()
