"""The editor's pi behaviours through the App's key handling (a fake host client): the kill-ring, large-paste
markers expanded on send, ``\\`` + Enter and Shift+Enter as a new line, ``@`` fuzzy file completion, pi's
namespaced keybinding ids."""

from __future__ import annotations

import asyncio
import io
import os
import sys

from prompt_toolkit.input.vt100_parser import Vt100Parser
from prompt_toolkit.key_binding.key_processor import KeyPress
from prompt_toolkit.keys import Keys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_tui_app import FakeClient, typed

from pisces.modes.tui import fuzzy_files
from pisces.modes.tui.app import App
from pisces.modes.tui.keybindings import Keymap
from pisces.modes.tui.render import visible


def make(keymap: Keymap | None = None) -> App:
    return App(FakeClient(), io.StringIO(), width=60, height=20, keymap=keymap)


def key(app: App, k: object, data: str, alt: bool = False) -> None:
    presses = [KeyPress(Keys.Escape, "\x1b")] if alt else []
    app.on_keys([*presses, KeyPress(k, data)])  # type: ignore[arg-type]  # a Keys member or a character


def in_loop(body) -> None:
    async def main() -> None:
        body()
    asyncio.run(main())


def test_kill_ring_accumulates_kills_yanks_and_cycles() -> None:
    def body() -> None:
        app = make()
        typed(app, "alpha beta gamma")
        key(app, Keys.ControlW, "\x17")  # kills "gamma"
        key(app, Keys.ControlW, "\x17")  # kills "beta " and joins it: one entry "beta gamma"
        assert app.editor.text == "alpha "
        assert app.edit.ring.entries == ["beta gamma"]
        key(app, Keys.ControlA, "\x01")
        key(app, Keys.ControlK, "\x0b")  # a new entry (a motion came between)
        assert app.editor.text == "" and app.edit.ring.entries == ["beta gamma", "alpha "]
        key(app, Keys.ControlY, "\x19")
        assert app.editor.text == "alpha "
        key(app, "y", "y", alt=True)  # Alt+Y: the kill before it instead
        assert app.editor.text == "beta gamma"
        key(app, "y", "y", alt=True)
        assert app.editor.text == "alpha "
        typed(app, "x")
        key(app, "y", "y", alt=True)  # not right after a yank: nothing
        assert app.editor.text == "alpha x"
        key(app, Keys.ControlJ, "\n")  # a new line
        key(app, Keys.ControlU, "\x15")  # at a line's start Ctrl+U kills the newline before it
        assert app.editor.text == "alpha x"
    in_loop(body)


def test_large_paste_is_a_marker_expanded_on_send() -> None:
    def body() -> None:
        app = make()
        big = "\n".join(f"line {i}" for i in range(42))
        typed(app, "see ")
        app.on_keys([KeyPress(Keys.BracketedPaste, big)])
        typed(app, " and ")
        app.on_keys([KeyPress(Keys.BracketedPaste, "x" * 1500)])
        app.on_keys([KeyPress(Keys.BracketedPaste, "small\npaste")])
        assert app.editor.text == "see [paste #1 +42 lines] and [paste #2 1500 chars]small\npaste"
        key(app, Keys.ControlM, "\r")
        sent = app.client.sent[-1]
        assert sent["type"] == "prompt"
        assert sent["message"] == "see " + big + " and " + "x" * 1500 + "small\npaste"
        assert app.editor.text == "" and app.edit.pastes == {}
        # a marker typed by hand (no paste held) stays as typed
        typed(app, "[paste #7 +3 lines]")
        key(app, Keys.ControlM, "\r")
        assert app.client.sent[-1]["message"] == "[paste #7 +3 lines]"
    in_loop(body)


def test_backslash_enter_and_shift_enter_make_a_new_line() -> None:
    def body() -> None:
        app = make()
        typed(app, "first\\")
        key(app, Keys.ControlM, "\r")
        assert app.editor.text == "first\n" and not app.client.sent
        typed(app, "second")
        # Shift+Enter as the kitty keyboard protocol and xterm's modifyOtherKeys send it
        for seq in ("\x1b[13;2u", "\x1b[27;2;13~"):
            got: list[KeyPress] = []
            parser = Vt100Parser(got.append)
            parser.feed(seq)
            parser.flush()
            assert [k.data for k in got] == [seq]  # one key (prompt_toolkit may call it Ctrl+M or Ctrl+J)
            assert Keymap().action(got[0].key, got[0].data) == "newLine"
            app.on_keys(got)
        assert app.editor.text == "first\nsecond\n\n" and not app.client.sent
        key(app, Keys.ControlM, "\r")
        assert app.client.sent[-1] == {"type": "prompt", "message": "first\nsecond\n\n"}
    in_loop(body)


def test_at_completion_is_fuzzy_bounded_and_honours_gitignore(tmp_path, monkeypatch) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("build/\n*.log\n")
    (tmp_path / "src" / "pisces" / "modes").mkdir(parents=True)
    (tmp_path / "src" / "pisces" / "modes" / "render_tui.py").write_text("x")
    (tmp_path / "src" / "pisces" / "reader.py").write_text("x")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "render_tui.py").write_text("x")
    (tmp_path / "debug.log").write_text("x")
    monkeypatch.chdir(tmp_path)
    fuzzy_files._cache.clear()
    files = fuzzy_files.project_files(str(tmp_path))
    assert "src/pisces/modes/render_tui.py" in files
    assert not any(f.startswith(("build", ".git/")) or f.endswith(".log") for f in files)

    def body() -> None:
        app = make()
        typed(app, "look at @rndtui")  # the list opens as the @ word is typed, best match first
        assert app.at.open and app.at.choices[0] == "src/pisces/modes/render_tui.py"
        rows = [visible(r) for r in app.at.rows(60)]
        assert rows[0] == "› src/pisces/modes/render_tui.py" and "Esc close" in rows[-1]
        key(app, Keys.ControlI, "\t")  # Tab takes it; a file is followed by a space
        assert app.editor.text == "look at @src/pisces/modes/render_tui.py " and not app.at.open
        app.editor.text = ""
        typed(app, "@re")
        choices = list(app.at.choices)
        assert len(choices) > 1 and app.at.index == 0
        key(app, Keys.Down, "")
        key(app, Keys.Down, "")
        key(app, Keys.Up, "")  # arrows move in the list, not through the history
        assert app.at.index == 1 and app.editor.text == "@re"
        key(app, Keys.ControlM, "\r")  # Enter takes the one chosen (and sends nothing)
        assert app.editor.text == "@" + choices[1] + ("" if choices[1].endswith("/") else " ")
        assert app.client.sent == []
        app.editor.text = ""
        typed(app, "@src")
        assert app.at.open
        key(app, Keys.Escape, "\x1b")  # Esc closes the list only
        assert not app.at.open and app.editor.text == "@src"
        typed(app, "/")  # stays closed for that word while it is typed
        assert not app.at.open
        key(app, Keys.ControlI, "\t")  # Tab asks for it again
        assert app.at.open and all("src/" in c for c in app.at.choices)
        typed(app, " ")  # leaving the word closes it
        assert not app.at.open
        typed(app, "@zzzz")
        assert not app.at.open
        key(app, Keys.ControlI, "\t")
        assert app.editor.text.endswith("@zzzz") and "no file matches" in app.hint
    in_loop(body)
    monkeypatch.setattr(fuzzy_files, "MAX_FILES", 3)
    fuzzy_files._cache.clear()
    assert len(fuzzy_files.project_files(str(tmp_path))) == 3


def test_keybindings_take_pi_namespaced_ids() -> None:
    keymap = Keymap({"tui.editor.yank": "ctrl+g", "app.message.followUp": ["ctrl+q"], "tui.input.newLine": "ctrl+n"})
    assert keymap.bindings["yank"] == ["ctrl+g"]
    assert keymap.bindings["followUp"] == ["ctrl+q"]

    def body() -> None:
        app = make(keymap)
        typed(app, "a b")
        key(app, Keys.ControlW, "\x17")
        key(app, Keys.ControlG, "\x07")
        assert app.editor.text == "a b"
        key(app, Keys.ControlN, "\x0e")
        assert app.editor.text == "a b\n"
    in_loop(body)


def test_a_command_being_typed_shows_what_it_takes() -> None:
    class Client(FakeClient):
        async def request(self, cmd: dict) -> dict:
            self.sent.append(cmd)
            if cmd["type"] == "get_commands":
                return {"success": True, "data": {"commands": [
                    {"name": "review", "description": "review the diff", "argumentHint": "<branch>"}]}}
            return {"success": True, "data": {}}

    out = io.StringIO()

    async def main() -> None:
        app = App(Client(), out, width=100, height=20)
        await app.refresh_state()
        typed(app, "/compact keep the API")
        app.draw()
        assert "/compact — compact the context (/compact [instructions])" in out.getvalue()
        app.editor.text = ""
        typed(app, "/review")
        app.draw()
        assert "/review — review the diff (<branch>)" in out.getvalue()
        app.editor.text = ""
        typed(app, "/nosuch")
        app.draw()
        assert "/nosuch —" not in out.getvalue()
    asyncio.run(main())
