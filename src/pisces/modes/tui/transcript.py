"""The transcript: the host's events turned into finished rows (committed once) and a live tail.

Guarantees: a streamed text block is committed row by row as soon as a row can no longer change (greedy
wrapping keeps every row but the last fixed, a closed paragraph or a code line is final), so what a delta
costs depends on the unfinished row only, never on the length of the answer. Every text from outside is
cleaned (``sanitize.clean``) before it is styled.

With ``coalesce`` (the interactive App), streamed text deltas are only collected when they arrive
(``delta``) and fed as one text at the next frame (``live``) or before anything else touches the transcript
(another event, a note, a card): a delta then costs a list append, however fast the model streams.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Callable

from pisces.modes.tui import cards
from pisces.modes.tui.render import on_bg, style, wrap
from pisces.modes.tui.sanitize import clean

_INLINE = re.compile(r"(\*\*[^*]+\*\*|`[^`]+`)")
TAIL_LINES = 5  # rows of a tool's output shown on its card
EXPANDED_LINES = 200  # with Ctrl+O


def _inline(row: str) -> str:
    def sub(m: re.Match[str]) -> str:
        t = m.group()
        return style(t[2:-2], 1) if t.startswith("**") else style(t[1:-1], 36)
    return _INLINE.sub(sub, row)


class Stream:
    """One streamed text (or thinking) block: ``feed`` deltas, ``finish`` at its end; finished rows go to
    ``emit``."""

    def __init__(self, emit: Callable[[list[str]], None], width: int, *, thinking: bool = False) -> None:
        self.emit = emit
        self.width = width
        self.thinking = thinking
        self.line = ""  # the current source line (not yet ended by a newline), minus committed rows
        self.fence = False
        self.lexer: Any = None
        self.chars = 0

    def _row(self, text: str, *, last: bool = False) -> str:
        if self.thinking:
            return style(text, 2, 3)
        if self.fence:
            from pisces.modes.tui.highlight import highlight  # noqa: PLC0415 - the first code fence

            return highlight(text, self.lexer)
        if text.startswith("#"):
            return style(text.lstrip("# "), 1, 4)
        return _inline(text)

    def feed(self, delta: str) -> None:
        delta = clean(delta)
        self.chars += len(delta)
        parts = delta.split("\n")
        for i, part in enumerate(parts):
            self.line += part
            if i < len(parts) - 1:
                self._end_line()
        self._spill()

    def _end_line(self) -> None:
        line = self.line
        self.line = ""
        if line.strip().startswith("```"):
            self.emit([style(line, 2)])
            self.fence = not self.fence
            if self.fence and not self.thinking:
                from pisces.modes.tui.highlight import lexer_for  # noqa: PLC0415 - the first code fence

                self.lexer = lexer_for(line.strip()[3:])
            return
        width = self.width - 2 if self.thinking else self.width
        self.emit([self._row(r) for r in (wrap(line, width) if not self.fence else _chunks(line, width))])

    def _spill(self) -> None:
        """Commit the rows of the current line that can no longer change."""
        width = self.width - 2 if self.thinking else self.width
        if len(self.line) <= width:
            return
        rows = wrap(self.line, width) if not self.fence else _chunks(self.line, width)
        if len(rows) > 1:
            done = rows[:-1]
            self.emit([self._row(r) for r in done])
            consumed = len(self.line) - len(rows[-1])
            self.line = self.line[consumed:]

    def tail(self) -> list[str]:
        return [self._row(r) for r in wrap(self.line, self.width)] if self.line else []

    def finish(self) -> None:
        if self.line:
            self._end_line()
        self.fence = False


def _chunks(text: str, width: int) -> list[str]:
    width = max(1, width)
    return [text[i:i + width] for i in range(0, len(text), width)] or [""]


def _args_summary(name: str, args: Any) -> str:
    if not isinstance(args, dict):
        return ""
    if name == "bash":
        return str(args.get("command", ""))
    if name == "todo_write":
        return ""  # its output is the list
    if name == "task":  # the subagents show on the card while they run
        tasks = args.get("tasks")
        n = len(tasks) if isinstance(tasks, list) else 0
        return f"{args.get('agent') or 'agent'} · {n} task{'' if n == 1 else 's'}"
    for key in ("path", "pattern", "file_path"):
        if key in args:
            return str(args[key])
    return json.dumps(args)[:200]


def _result_text(result: Any) -> str:
    if isinstance(result, dict):
        content = result.get("content")
        if isinstance(content, list):
            return "\n".join(c.get("text", "") if c.get("type") == "text" else cards.image_placeholder(c)
                             for c in content if isinstance(c, dict) and c.get("type") in ("text", "image"))
    return "" if result is None else str(result)


class Transcript:
    """Feeds on the host's event frames (dicts); finished rows go to ``emit``."""

    def __init__(self, emit: Callable[[list[str]], None], width: int, *, coalesce: bool = False) -> None:
        self._sink = emit
        self.coalesce = coalesce
        self._deltas: list[str] = []  # text deltas received, not yet fed (coalesce)
        self._deltas_thinking = False
        self.group: list[dict[str, Any]] = []  # consecutive read/grep/find/ls calls, one card until closed
        self.retry: dict[str, Any] | None = None  # a retry waiting: until (monotonic), attempt, error
        self.todos: Any = None  # the session's todo phases (todo_update, get_state)
        self.width = width
        self.stream: Stream | None = None
        self.tools: dict[str, dict[str, Any]] = {}  # running tool calls: id -> {name, summary, tail}
        self.show_thinking = False
        self.expand_tools = False  # Ctrl+O: tool cards show up to EXPANDED_LINES of output
        self.status = ""  # one line: retrying, compacting, ...
        self.usage = {"input": 0, "output": 0, "cacheRead": 0, "cost": 0.0}

    @property
    def emit(self) -> Callable[[list[str]], None]:
        """Commits rows; a pending group card is committed first, so the order on screen is the order of
        events."""
        return self._emit

    @emit.setter
    def emit(self, sink: Callable[[list[str]], None]) -> None:
        self._sink = sink

    def _emit(self, rows: list[str]) -> None:
        if self._deltas:
            self.flush_deltas()
        self.close_group()
        self._sink(rows)

    def delta(self, text: str, thinking: bool = False) -> None:
        """A streamed text (or thinking) delta; with ``coalesce`` kept until the next frame."""
        if self._deltas and thinking != self._deltas_thinking:
            self.flush_deltas()
        self._deltas.append(text)
        self._deltas_thinking = thinking
        if not self.coalesce:
            self.flush_deltas()

    def flush_deltas(self) -> None:
        """Feed the deltas collected so far, as one text."""
        deltas, self._deltas = self._deltas, []
        if deltas:
            self._update({"type": "thinking_delta" if self._deltas_thinking else "text_delta",
                          "delta": deltas[0] if len(deltas) == 1 else "".join(deltas)})

    def close_group(self) -> None:
        if self.group:
            group, self.group = self.group, []
            self._sink(cards.group_rows(group, self.width))

    def resize(self, width: int) -> None:
        self.flush_deltas()
        self.width = width
        if self.stream is not None:
            self.stream.width = width

    def note(self, text: str, *codes: int) -> None:
        self.emit([style(r, *codes) for r in wrap(clean(text), self.width)])

    def user(self, text: str) -> None:
        rows = []
        for line in clean(text).split("\n"):
            rows.extend(wrap(line, self.width - 2))
        self.emit([""] + [on_bg(style(("› " if i == 0 else "  ") + r, 1, 36), "userMessageBg", None, self.width)
                          for i, r in enumerate(rows)] + [""])

    def _end_stream(self) -> None:
        if self.stream is not None:
            s = self.stream
            s.finish()
            if s.thinking and not self.show_thinking:
                self.emit([style(f"∴ thought ({s.chars} characters; Ctrl+T shows thinking)", 2, 3)])
            self.stream = None

    def on_event(self, ev: dict[str, Any]) -> None:
        kind = ev.get("type")
        if kind == "message_update":
            ae = ev.get("assistantMessageEvent") or {}
            if ae.get("type") in ("text_delta", "thinking_delta"):
                self.delta(str(ae.get("delta", "")), ae.get("type") == "thinking_delta")
            else:
                self.flush_deltas()
                self._update(ae)
            return
        if self._deltas:
            self.flush_deltas()
        if kind == "message_start":
            msg = ev.get("message") or {}
            if msg.get("role") == "user":
                self.user(_message_text(msg))
        elif kind == "message_end":
            self._end_stream()
            msg = ev.get("message") or {}
            if msg.get("role") == "assistant":
                u = msg.get("usage") or {}
                for k in ("input", "output", "cacheRead"):
                    self.usage[k] += int(u.get(k) or 0)
                self.usage["cost"] += float((u.get("cost") or {}).get("total") or 0)
                if msg.get("stopReason") == "error":
                    self.note("error: " + str(msg.get("errorMessage") or "the model failed"), 31)
                elif msg.get("stopReason") == "aborted":
                    self.note("aborted", 33)
        elif kind == "tool_execution_start":
            self._end_stream()
            name = str(ev.get("toolName", "tool"))
            summary = clean(_args_summary(name, ev.get("args")))
            self.tools[str(ev.get("toolCallId"))] = {"name": name, "summary": summary, "args": ev.get("args"),
                                                    "tail": ""}
        elif kind == "tool_execution_update":
            t = self.tools.get(str(ev.get("toolCallId")))
            if t is not None:
                t["tail"] = _result_text(ev.get("partialResult"))[-2000:]
                partial = ev.get("partialResult")
                t["details"] = partial.get("details") if isinstance(partial, dict) else None
        elif kind == "tool_execution_end":
            t = self.tools.pop(str(ev.get("toolCallId")), None) or {"name": str(ev.get("toolName")), "summary": "",
                                                                      "args": None}
            output = _result_text(ev.get("result"))
            if t["name"] in cards.GROUPED and not ev.get("isError") and not self.expand_tools:
                lines = output.rstrip("\n").count("\n") + 1 if output.strip() else 0
                self.group.append({"name": t["name"], "summary": t["summary"], "lines": lines})
            else:
                self._tool_card(t, output, bool(ev.get("isError")))
        elif kind == "auto_retry_start":
            delay = ev.get("delayMs")
            delay_s = min(float(delay), 86_400_000.0) / 1000 if isinstance(delay, (int, float)) else 0.0
            self.retry = {"until": time.monotonic() + max(0.0, delay_s),
                          "attempt": ev.get("attempt"), "maxAttempts": ev.get("maxAttempts"),
                          "error": clean(str(ev.get("errorMessage", "")))[:200]}
        elif kind == "todo_update":
            self.todos = ev.get("todoPhases")
        elif kind == "auto_retry_end":
            self.retry = None
            if not ev.get("success"):
                self.note("retries gave up: " + str(ev.get("finalError", "")), 31)
        elif kind in ("auto_compaction_start", "compaction_start"):
            self.status = "compacting the context…"
        elif kind in ("auto_compaction_end", "compaction_end"):
            self.status = ""
            self.note("context compacted", 2)
        elif kind == "budget_warning":
            self.note("budget: " + json.dumps({k: v for k, v in ev.items() if k != "type"}), 33)
        elif kind == "agent_end":
            self._end_stream()
            self.close_group()

    def _update(self, ae: dict[str, Any]) -> None:
        kind = ae.get("type")
        if kind in ("text_delta", "thinking_delta"):
            thinking = kind == "thinking_delta"
            if self.stream is None or self.stream.thinking != thinking:
                self._end_stream()
                sink = self.emit if (not thinking or self.show_thinking) else (lambda rows: None)
                self.stream = Stream(sink, self.width, thinking=thinking)
            self.stream.feed(str(ae.get("delta", "")))
        elif kind in ("text_end", "thinking_end"):
            self._end_stream()

    def _tool_card(self, t: dict[str, Any], output: str, error: bool) -> None:
        name = t["name"]
        head = style(("✗ " if error else "● ") + name, 1, 31 if error else 32) + " " + style(t["summary"], 2)
        rows = [on_bg(head, "toolErrorBg" if error else "toolSuccessBg", None, self.width)]
        given = t.get("args")
        args: dict[str, Any] = given if isinstance(given, dict) else {}
        if name == "edit" and not error:
            for old_new, sign, colour in (("oldText", "-", 31), ("newText", "+", 32)):
                for line in clean(str(args.get(old_new, ""))).split("\n")[:20]:
                    rows.append(style(f"  {sign} {line}", colour))
        elif name == "write" and not error:
            lines = clean(str(args.get("content", ""))).split("\n")
            rows.extend(style(f"  + {line}", 32) for line in lines[:10])
            if len(lines) > 10:
                rows.append(style(f"  … {len(lines) - 10} more lines", 2))
        else:
            lines = [x for x in clean(output).split("\n")]
            while lines and not lines[-1].strip():
                lines.pop()
            keep = EXPANDED_LINES if self.expand_tools else TAIL_LINES
            if name in ("read", "grep", "find", "ls") and not error and not self.expand_tools:
                rows.append(style(f"  {len(lines)} lines", 2))
            else:
                if len(lines) > keep:
                    rows.append(style(f"  … {len(lines) - keep} earlier lines", 2))
                for line in lines[-keep:]:
                    rows.extend(style("  " + r, 31 if error else 2) for r in wrap(line, self.width - 2))
        self.emit(rows)

    def live(self) -> list[str]:
        """The rows of the live region above the editor: the streaming tail, running tools, status."""
        if self._deltas:
            self.flush_deltas()
        rows: list[str] = cards.group_rows(self.group, self.width) if self.group else []
        if self.stream is not None:
            if self.stream.thinking and not self.show_thinking:
                rows.append(style("∴ thinking…", 2, 3))
            else:
                rows.extend(self.stream.tail())
        for t in self.tools.values():
            rows.append(on_bg(style("◌ " + t["name"], 1, 33) + " " + style(t["summary"], 2), "toolPendingBg", None,
                              self.width))
            sub = cards.subagent_rows(t.get("details"), self.width)
            if sub:
                rows.extend(sub)
                continue
            tail = [x for x in clean(t["tail"]).split("\n") if x.strip()][-3:]
            rows.extend(style("  " + x, 2) for x in tail)
        if self.retry is not None:
            rows.append(cards.retry_row(self.retry))
        if self.status:
            rows.append(style(self.status, 33))
        rows.extend(cards.todo_rows(self.todos, self.width))
        return rows


def _message_text(msg: dict[str, Any]) -> str:
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) if c.get("type") == "text" else cards.image_placeholder(c)
                         for c in content if isinstance(c, dict) and c.get("type") in ("text", "image"))
    return ""
