"""The interactive loop: keys in, commands to the host, frames from it into the transcript and the renderer.

Guarantees: the terminal is restored on every way out (``Terminal.restore`` runs in a ``finally`` and from the
signal handlers); the editor's text survives dialogs, commands and aborts; frames are coalesced to FRAME_S.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from typing import Any

from prompt_toolkit.buffer import Buffer
from prompt_toolkit.input import create_input
from prompt_toolkit.keys import Keys

from pisces.modes.tui.cards import McpStatus
from pisces.modes.tui.complete import command_hint
from pisces.modes.tui.dropdown import AtDropdown
from pisces.modes.tui.editor import EditorOps
from pisces.modes.tui.footer import footer_rows
from pisces.modes.tui.keybindings import Keymap, key_id
from pisces.modes.tui.nav_commands import NAV_COMMANDS
from pisces.modes.tui.render import Renderer, fit, style
from pisces.modes.tui.sanitize import clean
from pisces.modes.tui.transcript import Transcript
from pisces.modes.tui.views import dialog_rows

FRAME_S = 1 / 60
ESC_WAIT_S = 0.05
ESC_TWICE_S = 0.8  # two Esc within this on an empty editor while idle open the tree
DIALOG_METHODS = ("select", "confirm", "input", "editor")
COMMANDS = {
    "/model": "pick or set the model (/model provider/id)",
    "/thinking": "set the thinking level (/thinking high)",
    "/new": "start a new session",
    "/compact": "compact the context (/compact [instructions])",
    "/plan": "plan mode on or off (/plan, /plan on, /plan off)",
    "/name": "name the session",
    "/session": "file, tokens and cost of this session",
    "/export": "write the session as HTML",
    "/copy": "copy the last reply (OSC 52)",
    "/resume": "pick another session of this directory",
    "/fork": "a new session from an earlier message",
    "/reload": "reload extensions, skills, prompts",
    "/sandbox": "show or set the OS sandbox (/sandbox read-only, /sandbox network off)",
    "/login": "log in to a subscription (/login github-copilot, /login openai-codex)",
    "/logout": "remove a provider's login (/logout github-copilot)",
    "/hotkeys": "show the keys",
    "/mcp": "the MCP servers and their state",
    "/quit": "leave",
}
COMMANDS.update(NAV_COMMANDS)
HIDDEN = ("/switch-to", "/fork-at", "/thinking-cycle")  # what selectors and keys run

class App:
    def __init__(self, client: Any, out: Any, *, width: int, height: int, history: Any = None,
                 keymap: Any = None) -> None:
        self.client = client
        self.out = out
        self.renderer = Renderer(self._write, width, height)
        self.transcript = Transcript(self.renderer.commit, width, coalesce=True)
        self.editor = Buffer(multiline=True, history=history)
        self.edit = EditorOps(self.editor)  # kill-ring, paste markers, \ + Enter
        self.busy = False
        self.queued: list[tuple[str, str]] = []
        self.dialog: dict[str, Any] | None = None
        self.dialog_buffer = Buffer(multiline=False)
        self.statuses: dict[str, str] = {}
        self.widgets: dict[str, list[str]] = {}
        self.state: dict[str, Any] = {}
        self.last_ctrl_c = 0.0
        self.last_esc = 0.0
        self.done = asyncio.Event()
        self._frame: asyncio.TimerHandle | None = None
        self.hint = ""
        self.extra_commands: list[str] = []  # the session's commands (get_commands), for Tab
        self.command_usage: dict[str, str] = dict(COMMANDS)  # /name -> what it does and takes (the hint row)
        self.keymap = keymap if keymap is not None else Keymap()
        self.mcp = McpStatus()
        self.at = AtDropdown()  # the @ file list under the editor
        self.theme_watch: Any = None  # theme_watch.ThemeWatch of a custom theme file (main)
        self.kitty: Any = None  # kitty.Protocol: the keyboard flags, pushed when the terminal answers (run)

    # -- output ----------------------------------------------------------------------------------
    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def schedule(self) -> None:
        if self._frame is None:
            self._frame = asyncio.get_running_loop().call_later(FRAME_S, self.draw)

    def draw(self) -> None:
        self._frame = None
        try:
            if self.theme_watch is not None:
                self.theme_watch.check()  # a custom theme file saved: the rows drawn from now on use it
            self._draw()
        except Exception as exc:  # noqa: BLE001 - a bug in a frame must not take the terminal down
            self.renderer.commit([f"pisces: the screen could not be drawn: {exc}"])
            self.renderer.set_live([self.editor.text[-200:]], None)
            self.renderer.flush()

    def _draw(self) -> None:
        rows = self.transcript.live()
        for lines in self.widgets.values():
            rows.extend(lines)
        for kind, text in self.queued:
            rows.append(style(f" {kind}: {text[:60]} ", 7, 2))
        if self.dialog is not None:
            rows.extend(self._dialog_rows())
        width = self.renderer.width
        rows.append(style("─" * width, 2))
        lines = self.editor.text.split("\n")
        doc = self.editor.document
        cursor: tuple[int, int] | None = (0, 0)
        inner = max(1, width - 2)
        for i, line in enumerate(lines):
            chunks = [line[j:j + inner] for j in range(0, len(line), inner)] or [""]
            if i == doc.cursor_position_row:
                col = doc.cursor_position_col
                r = col // inner
                if r >= len(chunks):
                    chunks.append("")
                cursor = (len(rows) + r, 2 + col - r * inner)
            for j, chunk in enumerate(chunks):
                rows.append(("› " if i == 0 and j == 0 else "  ") + chunk)
        rows.append(style("─" * width, 2))
        rows.extend(self.at.rows(width))
        hint = self.hint or command_hint(self.editor.text, self.command_usage)
        if hint:
            rows.append(style(hint, 2))
        rows.extend(footer_rows(self.state, self.transcript.usage, self.busy, self.statuses, width))
        if self.dialog is not None and self.dialog["method"] in ("input", "editor"):
            cursor = None
        self.renderer.set_live(rows, cursor)
        self.renderer.flush()

    def _dialog_rows(self) -> list[str]:
        assert self.dialog is not None
        return dialog_rows(self.dialog, self.renderer.width, self.dialog_buffer.text)

    # -- frames from the host --------------------------------------------------------------------
    def on_delta(self, text: str, thinking: bool) -> None:
        """A streamed delta (the LocalClient's shortcut): collected, drawn with the next frame."""
        self.transcript.delta(text, thinking)
        if self._frame is None:
            self.schedule()

    def on_frame(self, ev: dict[str, Any]) -> None:
        kind = ev.get("type")
        if kind == "agent_start":
            self.busy = True
        elif kind == "agent_settled":
            self.busy = False
            asyncio.ensure_future(self.refresh_state())
        elif kind == "queue_update":
            self.queued = ([("steer", s) for s in ev.get("steering", [])]
                           + [("follow-up", s) for s in ev.get("followUp", [])])
        elif kind == "extension_ui_request":
            self._ui_request(ev)
        elif kind == "tool_approval_request":
            self._approval_request(ev)
        elif kind == "tool_approval_cancel":
            if self.dialog is not None and self.dialog["id"] == ev.get("targetId"):
                self.dialog = None
                self.transcript.note(f"approval request withdrawn ({ev.get('reason')})", 2)
        elif kind == "extension_error":
            self.transcript.note(f"extension error: {ev.get('error')}", 31)
        elif kind == "mcp_server_status":
            self.mcp.on_event(ev)
            self._mcp_footer()
        self.transcript.on_event(ev)
        if kind == "auto_retry_start":
            self._countdown()
        self.schedule()

    def _countdown(self) -> None:
        """While a retry waits, one frame a second for its countdown (no timer otherwise)."""
        retry = self.transcript.retry
        if retry is None or retry["until"] <= time.monotonic():
            return
        left = retry["until"] - time.monotonic()
        asyncio.get_running_loop().call_later(left % 1.0 or 1.0, self._countdown)
        self.schedule()

    def _mcp_footer(self) -> None:
        summary = self.mcp.summary()
        if summary:
            self.statuses["mcp"] = summary

    def _ui_request(self, ev: dict[str, Any]) -> None:
        from pisces.modes.tui.sanitize import clean  # noqa: PLC0415 - the module is already loaded

        method = ev.get("method")
        if method in DIALOG_METHODS:
            self.dialog = {"id": ev.get("id"), "method": method, "title": clean(str(ev.get("title", ""))),
                           "message": clean(str(ev.get("message", "") or "")),
                           "options": [clean(str(o)) for o in ev.get("options") or []], "index": 0}
            self.dialog_buffer.text = str(ev.get("prefill", "") or "") if method == "editor" else ""
        elif method == "cancel":
            if self.dialog is not None and self.dialog["id"] == ev.get("targetId"):
                self.dialog = None
        elif method == "notify":
            kind = ev.get("notifyType", "info")
            self.transcript.note(str(ev.get("message", "")), 31 if kind == "error" else 33 if kind == "warning" else 36)
        elif method == "setStatus":
            key = str(ev.get("statusKey", ""))
            if ev.get("statusText"):
                self.statuses[key] = clean(str(ev["statusText"]))
            else:
                self.statuses.pop(key, None)
        elif method == "setWidget":
            key = str(ev.get("widgetKey", ""))
            lines = ev.get("widgetLines")
            if lines:
                self.widgets[key] = [clean(str(x)) for x in lines][:10]
            else:
                self.widgets.pop(key, None)
        elif method == "setTitle":
            self._write("\x1b]0;" + clean(str(ev.get("title", "")))[:200] + "\x07")
        elif method == "set_editor_text":
            self.editor.text = str(ev.get("text", ""))

    def _approval_request(self, ev: dict[str, Any]) -> None:
        from pisces.modes.tui.approval_view import approval_dialog  # noqa: PLC0415 - the first approval

        self.dialog = approval_dialog(ev, self.renderer.width)

    def _answer(self, **fields: Any) -> None:
        d = self.dialog
        assert d is not None
        self.dialog = None
        if d["method"] == "approval":
            from pisces.modes.tui.approval_view import approval_answer  # noqa: PLC0415 - loaded with the dialog

            if d.get("asking_reason"):
                fields = {"value": "deny", "message": fields.get("value", "")}
            answer = approval_answer(d, fields)
            if answer is None:  # "deny with a message": ask for it, same request
                d["asking_reason"] = True
                d["method"] = "approval_reason"
                self.dialog = d
                self.dialog_buffer.text = ""
                return
            self.client.send(answer)
            return
        if d["method"] == "approval_reason":
            d["method"] = "approval"
            self.dialog = d
            self._answer(**fields)
            return
        self.client.send({"type": "extension_ui_response", "id": d["id"], **fields})

    async def refresh_state(self) -> None:
        resp = await self.client.request({"type": "get_state"})
        if resp.get("success"):
            self.state = resp.get("data") or {}
            if "todoPhases" in self.state:
                self.transcript.todos = self.state["todoPhases"]
        if not self.mcp.servers:
            mcp = await self.client.request({"type": "mcp_status"})
            self.mcp.load(mcp.get("data") if mcp.get("success") else None)
            self._mcp_footer()
        cmds = await self.client.request({"type": "get_commands"})
        if cmds.get("success"):
            listed = [c for c in (cmds.get("data") or {}).get("commands", []) if isinstance(c, dict) and c.get("name")]
            self.extra_commands = ["/" + str(c["name"]) for c in listed]
            for c in listed:
                hint = str(c.get("argumentHint") or c.get("argument-hint") or "")
                text = " ".join(x for x in (str(c.get("description") or ""), hint and f"({hint})") if x)
                self.command_usage.setdefault("/" + str(c["name"]), clean(text)[:200])
        ctx = await self.client.request({"type": "get_context_usage"})
        if ctx.get("success"):
            self.state["contextUsage"] = ctx.get("data")
        self.schedule()

    # -- keys ----------------------------------------------------------------------------------------
    def on_keys(self, keys: list[Any]) -> None:
        i = 0
        while i < len(keys):
            k = keys[i]
            alt = False
            if k.key == Keys.Escape and i + 1 < len(keys) and keys[i + 1].key not in (Keys.Escape,
                                                                                     Keys.BracketedPaste):
                alt, i = True, i + 1  # Esc then a key in one read: that key with Alt
                k = keys[i]
            try:
                self.on_key(k, alt)
                if self.dialog is None:
                    self.at.update(self.editor)
            except Exception as exc:  # noqa: BLE001 - a key must never take the UI down
                self.transcript.note(f"internal error: {exc}", 31)
            i += 1
        self.schedule()

    def on_key(self, k: Any, alt: bool = False) -> None:
        if self.dialog is not None and "view" in self.dialog:
            self.dialog["view"].key(key_id(k.key, k.data, alt), "" if alt else k.data)
            return
        if self.dialog is not None:
            if alt and k.key != Keys.ControlM:
                return
            self._dialog_key(k)
            return
        key = k.key
        action = self.keymap.action(key, k.data, alt)
        if action != "clear":
            self.hint = ""
        buf = self.editor
        doc = buf.document
        if self.at.open and key != Keys.BracketedPaste and self.at.key(action, buf):
            return
        if key == Keys.BracketedPaste:
            self.edit.paste(k.data)
        elif self.edit.handle(action):
            pass
        elif action == "clear":
            now = time.monotonic()
            if buf.text:
                buf.reset()
                self.last_ctrl_c = 0.0
            elif now - self.last_ctrl_c < 1.5:
                self.done.set()
            else:
                self.last_ctrl_c = now
                self.hint = f"{self.keymap.keys_of('clear')} again to quit"
        elif action == "exit" and not buf.text:
            self.done.set()
        elif action == "exit" or action == "deleteCharForward":
            buf.delete()
        elif action == "submit":
            if not self.edit.backslash_newline():
                self.submit(follow_up=False)
        elif action == "followUp":
            self.submit(follow_up=True)
        elif action == "newLine":
            buf.insert_text("\n")
        elif action == "interrupt" and not self.busy and not buf.text:  # Esc twice: the tree
            now = time.monotonic()
            if now - self.last_esc < ESC_TWICE_S:
                self.last_esc = 0.0
                asyncio.ensure_future(self.command("/tree"))
            else:
                self.last_esc = now
        elif action == "interrupt":
            if self.busy:
                self.client.send({"type": "abort"})
                if self.queued:  # the queued messages come back to the editor, not lost with the run
                    asyncio.ensure_future(self.pull_queue())
        elif action == "dequeue":
            asyncio.ensure_future(self.pull_queue())
        elif action == "toggleThinking":
            self.transcript.show_thinking = not self.transcript.show_thinking
            self.hint = "thinking " + ("shown" if self.transcript.show_thinking else "hidden")
        elif action == "expandTools":
            self.transcript.expand_tools = not self.transcript.expand_tools
            self.hint = "tool output " + ("expanded" if self.transcript.expand_tools else "collapsed") + \
                " (from the next tool card on)"
        elif action == "cycleThinkingLevel":
            asyncio.ensure_future(self.command("/thinking-cycle"))
        elif action == "selectModel":
            asyncio.ensure_future(self.command("/model"))
        elif action == "suspend":
            self.suspend()
        elif action == "deleteCharBackward":
            buf.delete_before_cursor()
        elif action == "cursorLeft":
            buf.cursor_left()
        elif action == "cursorRight":
            buf.cursor_right()
        elif action == "cursorWordLeft":
            buf.cursor_position += doc.find_previous_word_beginning() or 0
        elif action == "cursorWordRight":
            buf.cursor_position += doc.find_next_word_ending() or 0
        elif action == "cursorUp":
            if doc.cursor_position_row == 0:
                buf.history_backward()
            else:
                buf.cursor_up()
        elif action == "cursorDown":
            if doc.is_cursor_at_the_end_of_line and doc.cursor_position_row == doc.line_count - 1:
                buf.history_forward()
            else:
                buf.cursor_down()
        elif action == "cursorLineStart":
            buf.cursor_position += doc.get_start_of_line_position()
        elif action == "cursorLineEnd":
            buf.cursor_position += doc.get_end_of_line_position()
        elif action == "undo":
            buf.undo()
        elif action == "tab":
            self._complete()
        elif not alt and len(k.data) == 1 and k.data.isprintable():
            buf.save_to_undo_stack()
            buf.insert_text(k.data)

    def _complete(self) -> None:
        """Tab: a /command (built-in, then the session's: extensions, prompt templates, skills), an @file or a
        path under the cursor."""
        from pisces.modes.tui.complete import complete_word  # noqa: PLC0415 - the first Tab

        doc = self.editor.document
        before = doc.text_before_cursor
        word = before.rsplit(None, 1)[-1] if before and not before[-1].isspace() else ""
        commands = list(COMMANDS) + [c for c in self.extra_commands if c not in COMMANDS]
        if before.startswith("/") and " " not in before:
            choices = [n for n in commands if n.startswith(before)]
        elif word.startswith("@"):
            self.at.update(self.editor, force=True)  # the list again (after Esc), or its only match taken
            if len(self.at.choices) == 1:
                self.at.accept(self.editor)
            elif not self.at.open:
                self.hint = f"no file matches {word}"
            return
        else:
            choices = complete_word(word, os.getcwd()) if word else []
        if not choices:
            return
        common = os.path.commonprefix(choices)
        if len(choices) == 1 and before.startswith("/") and " " not in before:
            common += " "
        if len(common) > len(word if not before.startswith("/") or " " in before else before):
            self.editor.insert_text(common[len(word if not before.startswith("/") or " " in before else before):])
        if len(choices) > 1:
            self.hint = "  ".join(choices[:12]) + ("  …" if len(choices) > 12 else "")

    def _dialog_key(self, k: Any) -> None:
        d = self.dialog
        assert d is not None
        key = k.key
        if key in (Keys.Escape, Keys.ControlC):
            self._answer(cancelled=True)
            return
        if d["method"] in ("select", "approval"):
            if key == Keys.Up:
                d["index"] = (d["index"] - 1) % max(1, len(d["options"]))
            elif key == Keys.Down:
                d["index"] = (d["index"] + 1) % max(1, len(d["options"]))
            elif key == Keys.ControlM and d["options"]:
                if d.get("local"):
                    choice = d["options"][d["index"]]
                    self.dialog = None
                    d["local"](choice)
                else:
                    self._answer(value=d["options"][d["index"]])
        elif d["method"] == "confirm":
            if k.data in ("y", "Y"):
                self._answer(confirmed=True)
            elif k.data in ("n", "N"):
                self._answer(confirmed=False)
        else:
            if key == Keys.ControlM:
                self._answer(value=self.dialog_buffer.text)
            elif key in (Keys.Backspace, Keys.ControlH):
                self.dialog_buffer.delete_before_cursor()
            elif key == Keys.BracketedPaste:
                self.dialog_buffer.insert_text(k.data)
            elif len(k.data) == 1 and k.data.isprintable():
                self.dialog_buffer.insert_text(k.data)

    # -- sending -----------------------------------------------------------------------------------------
    def submit(self, *, follow_up: bool) -> None:
        text = self.edit.expand(self.editor.text)
        if not text.strip():
            return
        self.editor.text = text
        self.editor.append_to_history()
        self.editor.reset()
        self.edit.sent()
        if text.startswith("/") and (text.split()[0] in COMMANDS or text.split()[0] in HIDDEN):
            asyncio.ensure_future(self.command(text))
            return
        if text.startswith("!"):
            only = text.startswith("!!")
            command = text[2:] if only else text[1:]
            asyncio.ensure_future(self.bash(command, only))
            return
        if self.busy:
            self.client.send({"type": "follow_up" if follow_up else "steer", "message": text})
        else:
            self.client.send({"type": "prompt", "message": text})

    async def pull_queue(self) -> None:
        """Alt+Up (and Esc while a reply runs): the queued messages back into the editor, removed from the
        queue."""
        resp = await self.client.request({"type": "clear_queue"})
        data = resp.get("data") or {}
        texts = [*data.get("steering", []), *data.get("followUp", [])]
        if texts:
            joined = "\n".join(texts)
            self.editor.text = joined + ("\n" + self.editor.text if self.editor.text else "")
            self.editor.cursor_position = len(self.editor.text)
        self.schedule()

    async def bash(self, command: str, only: bool) -> None:
        self.transcript.note("$ " + command, 1)
        resp = await self.client.request({"type": "bash", "command": command, "excludeFromContext": only})
        data = resp.get("data") or {}
        self.transcript._tool_card({"name": "bash", "summary": command, "args": None},
                                   str(data.get("output", resp.get("error", ""))), not resp.get("success"))
        self.schedule()

    async def command(self, text: str) -> None:
        from pisces.modes.tui.commands import run_command  # noqa: PLC0415 - loaded on the first command

        try:
            await run_command(self, text)
        except Exception as exc:  # noqa: BLE001 - a failed command is reported, the UI keeps serving
            self.transcript.note(f"{text.split()[0]}: {exc}", 31)
        self.schedule()

    def pick(self, title: str, options: list[str], then: Any) -> None:
        """A local selector (the same dialog as an extension's select); never over a dialog already open (an
        approval or an extension's question that arrived while the command ran)."""
        if self.dialog is not None:
            self.transcript.note(f"{title}: another dialog is open: answer it first", 33)
            self.schedule()
            return
        self.dialog = {"id": None, "method": "select", "title": title, "message": "", "options": options,
                       "index": 0, "local": then}
        self.schedule()

    def pick_command(self, title: str, choices: dict[str, str], command: str) -> None:
        """A selector of ``choices`` (label -> argument); the one picked runs ``command argument``."""
        def run(label: str) -> None:
            asyncio.ensure_future(self.command(f"{command} {choices[label]}"))
        self.pick(title, list(choices), run)

    # -- the terminal --------------------------------------------------------------------------------------
    def suspend(self) -> None:
        self.renderer.clear_live()
        pushed = self.kitty is not None and self.kitty.pushed
        self._write("\x1b[?2004l" + (self.kitty.pop() if self.kitty is not None else ""))
        term = getattr(self, "terminal_input", None)
        if term is not None:
            with term.cooked_mode():
                os.kill(0, signal.SIGTSTP)  # the whole job stops (a wrapping script too), as with a real ^Z
        self._write("\x1b[?2004h")
        if pushed:
            self.kitty.push()
        self.resized()

    def resized(self) -> None:
        try:
            size = os.get_terminal_size(self.out.fileno())
        except (OSError, ValueError, AttributeError):
            return
        self.renderer.resize(size.columns, size.lines)
        self.transcript.resize(size.columns)
        self.draw()

    async def run(self) -> None:
        from pisces.modes.tui import kitty  # noqa: PLC0415 - interactive only

        inp = create_input(sys.stdin)
        self.terminal_input = inp
        self.kitty = kitty.Protocol(inp, self._write)
        loop = asyncio.get_running_loop()
        flush: list[asyncio.TimerHandle] = []

        def flush_keys() -> None:
            held = self.kitty.flush()
            parser: Any = getattr(inp, "vt100_parser", None)
            if held and parser is not None:
                parser.feed(held)  # half a sequence that never got its end
            self.on_keys(inp.flush_keys())

        def readable() -> None:
            self.on_keys(inp.read_keys())
            # a lone Esc waits in the parser for what may follow it: after ESC_WAIT_S it is a key of its own
            for handle in flush:
                handle.cancel()
            flush[:] = [loop.call_later(ESC_WAIT_S, flush_keys)]

        with inp.raw_mode(), inp.attach(readable):
            # bracketed paste; and the kitty keyboard flags asked for (pushed when the terminal answers)
            self._write("\x1b[?2004h" + self.kitty.query())
            loop.add_signal_handler(signal.SIGWINCH, self.resized)
            asyncio.ensure_future(self.refresh_state())
            self.draw()
            try:
                await self.done.wait()
            finally:
                loop.remove_signal_handler(signal.SIGWINCH)
                self.restore()

    def restore(self) -> None:
        if self.editor.text.strip():  # an unsent draft survives in the history (Up brings it back)
            try:
                self.editor.append_to_history()
            except Exception:  # noqa: BLE001 - leaving regardless
                pass
        try:
            self.draw()
            self.renderer.clear_live()
        finally:
            pop = self.kitty.pop() if self.kitty is not None else ""  # the keyboard flags first
            self._write(pop + "\x1b[?2004l\x1b[?2026l\x1b[0m\x1b[?25h\r\n")


def fit_rows(rows: list[str], width: int) -> list[str]:
    return [fit(r, width) for r in rows]
