"""The App's key handling in process, with a fake host client: dialogs never lose the editor's text, answers
take the host's frame forms, Ctrl+C clears then quits."""

from __future__ import annotations

import asyncio
import io

from prompt_toolkit.key_binding.key_processor import KeyPress
from prompt_toolkit.keys import Keys

from pisces.modes.tui.app import App


class FakeClient:
    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send(self, cmd: dict) -> None:
        self.sent.append(cmd)

    async def request(self, cmd: dict) -> dict:
        self.sent.append(cmd)
        if cmd["type"] == "clear_queue":
            return {"success": True, "data": {"steering": ["steer text"], "followUp": ["later text"]}}
        return {"success": True, "data": {}}


def typed(app: App, text: str) -> None:
    app.on_keys([KeyPress(ch, ch) for ch in text])


def run(body, after=None) -> None:
    async def main() -> None:
        app = App(FakeClient(), io.StringIO(), width=60, height=20)
        body(app)
        await asyncio.sleep(0.05)
        if after is not None:
            after(app)
    asyncio.run(main())


def test_a_dialog_keeps_the_draft_and_answers_in_the_host_form() -> None:
    def body(app: App) -> None:
        typed(app, "half-written draft")
        app.on_frame({"type": "extension_ui_request", "id": "d1", "method": "select", "title": "Pick",
                      "options": ["A", "B"]})
        app.on_keys([KeyPress(Keys.Down, ""), KeyPress(Keys.ControlM, "\r")])
        assert app.client.sent[-1] == {"type": "extension_ui_response", "id": "d1", "value": "B"}
        app.on_frame({"type": "tool_approval_request", "id": "a1", "toolCallId": "c1", "toolName": "bash",
                      "tier": "exec", "identity": {"kind": "shell", "command": "ls"}, "scopes": ["once", "session"]})
        app.on_keys([KeyPress(Keys.Down, ""), KeyPress(Keys.ControlM, "\r")])
        assert app.client.sent[-1] == {"type": "tool_approval_response", "id": "a1", "toolCallId": "c1",
                                       "approved": True, "scope": "session"}
        app.on_frame({"type": "tool_approval_request", "id": "a2", "toolCallId": "c2", "toolName": "bash",
                      "identity": {"kind": "shell", "command": "rm x"}, "scopes": ["once"]})
        app.on_keys([KeyPress(Keys.Up, ""), KeyPress(Keys.ControlM, "\r")])  # Deny with a message…
        typed(app, "no")
        app.on_keys([KeyPress(Keys.ControlM, "\r")])
        assert app.client.sent[-1] == {"type": "tool_approval_response", "id": "a2", "toolCallId": "c2",
                                       "approved": False, "message": "no"}
        assert app.editor.text == "half-written draft"
    run(body)


def test_ctrl_c_clears_then_twice_quits_and_enter_steers_while_busy() -> None:
    def body(app: App) -> None:
        app.on_frame({"type": "agent_start"})
        typed(app, "turn left")
        app.on_keys([KeyPress(Keys.ControlM, "\r")])
        assert app.client.sent[-1] == {"type": "steer", "message": "turn left"}
        typed(app, "then this")
        app.on_keys([KeyPress(Keys.Escape, "\x1b"), KeyPress(Keys.ControlM, "\r")])
        assert app.client.sent[-1] == {"type": "follow_up", "message": "then this"}
        app.on_keys([KeyPress(Keys.Escape, "\x1b")])
        assert app.client.sent[-1] == {"type": "abort"}
        typed(app, "x")
        app.on_keys([KeyPress(Keys.ControlC, "\x03")])
        assert app.editor.text == "" and not app.done.is_set()
        app.on_keys([KeyPress(Keys.ControlC, "\x03")])
        assert not app.done.is_set()
        app.on_keys([KeyPress(Keys.ControlC, "\x03")])
        assert app.done.is_set()
    run(body)


def test_tab_completes_commands_and_files(tmp_path, monkeypatch) -> None:
    (tmp_path / "notes.md").write_text("x")
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path)

    def body(app: App) -> None:
        app.extra_commands = ["/review"]
        typed(app, "/res")
        app.on_keys([KeyPress(Keys.ControlI, "\t")])
        assert app.editor.text == "/resume "
        app.editor.reset()
        typed(app, "/re")
        app.on_keys([KeyPress(Keys.ControlI, "\t")])
        assert "/reload" in app.hint and "/review" in app.hint and "/resume" in app.hint
        app.editor.reset()
        typed(app, "look at @no")
        app.on_keys([KeyPress(Keys.ControlI, "\t")])
        assert app.editor.text == "look at @notes.md "  # a file taken from the @ list: a space after it
        typed(app, "and ./s")
        app.on_keys([KeyPress(Keys.ControlI, "\t")])
        assert app.editor.text == "look at @notes.md and ./src/"
    run(body)


def test_esc_and_alt_up_bring_queued_messages_back_to_the_editor() -> None:
    def body(app: App) -> None:
        app.on_frame({"type": "agent_start"})
        app.on_frame({"type": "queue_update", "steering": ["steer text"], "followUp": ["later text"]})
        assert app.queued == [("steer", "steer text"), ("follow-up", "later text")]
        typed(app, "draft")
        app.on_keys([KeyPress(Keys.Escape, "\x1b")])
        assert {"type": "abort"} in app.client.sent

    def after(app: App) -> None:
        assert {"type": "clear_queue"} in app.client.sent
        assert app.editor.text == "steer text\nlater text\ndraft"
    run(body, after)


def test_ctrl_o_expands_later_tool_cards() -> None:
    rows: list[str] = []

    def body(app: App) -> None:
        app.transcript.emit = rows.extend
        app.on_keys([KeyPress(Keys.ControlO, "\x0f")])
        out = "\n".join(f"line{i}" for i in range(30))
        app.on_frame({"type": "tool_execution_start", "toolCallId": "1", "toolName": "bash", "args": {"command": "x"}})
        app.on_frame({"type": "tool_execution_end", "toolCallId": "1", "toolName": "bash",
                      "result": {"content": [{"type": "text", "text": out}]}})
        text = "\n".join(rows)
        assert "line0" in text and "line29" in text
    run(body)


def test_keybindings_json_rebinds_with_pi_names(tmp_path) -> None:
    from pisces.modes.tui.keybindings import load_keymap

    (tmp_path / "keybindings.json").write_text('{"followUp": "ctrl+q", "submit": ["return"]}')
    keymap, problem = load_keymap(str(tmp_path))
    assert problem is None

    def body(app: App) -> None:
        app.on_frame({"type": "agent_start"})
        typed(app, "queued")
        app.on_keys([KeyPress(Keys.ControlQ, "\x11")])
        assert app.client.sent[-1] == {"type": "follow_up", "message": "queued"}
        typed(app, "again")
        app.on_keys([KeyPress(Keys.Escape, "\x1b"), KeyPress(Keys.ControlM, "\r")])  # alt+enter: unbound now
        assert app.editor.text == "again"

    async def main() -> None:
        app = App(FakeClient(), io.StringIO(), width=60, height=20, keymap=keymap)
        body(app)
    asyncio.run(main())
    (tmp_path / "keybindings.json").write_text("[1, 2]")
    assert "not a JSON object" in load_keymap(str(tmp_path))[1]
