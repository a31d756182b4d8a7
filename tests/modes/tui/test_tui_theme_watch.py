"""Theme backgrounds in the palette, and a theme file reloaded on the next frame after it changed (no timer)."""

from __future__ import annotations

import json
import os

from pisces.modes.tui import render, theme, theme_watch


def _theme(**colors) -> dict:
    data = {"name": "t", "vars": {}, "colors": {k: "" for k in theme.REQUIRED}}
    data["colors"].update(colors)
    return data


def test_backgrounds_become_background_codes_and_rows_keep_them_through_resets() -> None:
    pal = theme.palette(theme.resolve(_theme(selectedBg="#102030", userMessageBg=17, error=196)), True)
    assert pal["selectedBg"] == "48;2;16;32;48" and pal["userMessageBg"] == "48;5;17" and pal[31] == "38;5;196"
    old = dict(render.PALETTE)
    try:
        render.PALETTE.clear()
        assert render.on_bg("x", "selectedBg") == "x"  # no theme, no fallback: unchanged
        assert render.on_bg("x", "selectedBg", 7) == "\x1b[7mx" + render.RESET
        render.PALETTE.update(pal)
        row = render.on_bg(render.style("a", 1) + "b", "userMessageBg", None, 6)
        assert row.startswith("\x1b[48;5;17m") and render.RESET + "\x1b[48;5;17m" in row  # kept after a reset
        assert render.width_of(row) == 6  # padded to the width
    finally:
        render.PALETTE.clear()
        render.PALETTE.update(old)


def test_a_changed_theme_file_applies_on_the_next_check_and_a_broken_one_is_reported(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(theme_watch, "CHECK_S", 0.0)
    old = dict(render.PALETTE)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_theme(muted=244)))
    problems: list[str] = []
    try:
        watch = theme_watch.ThemeWatch(str(path), problems.append)
        assert watch.check() is False  # unchanged
        tmp = tmp_path / "t.json.new"
        tmp.write_text(json.dumps(_theme(muted=208)))
        os.replace(tmp, path)
        assert watch.check() is True and render.PALETTE[2] in ("38;5;208", "38;2;255;135;0")
        path.write_text("{oops")
        assert watch.check() is False and "could not be read" in problems[-1]
        assert render.PALETTE[2] in ("38;5;208", "38;2;255;135;0")  # the theme in use stays
        assert watch.check() is False and len(problems) == 1  # reported once per change
        path.unlink()
        assert watch.check() is False and "is gone" in problems[-1]
    finally:
        render.PALETTE.clear()
        render.PALETTE.update(old)


def test_the_watched_path_is_the_custom_file_only(tmp_path) -> None:
    assert theme.theme_path(["a.json", "b.json"], None, str(tmp_path)) == "b.json"
    assert theme.theme_path(None, "dark", str(tmp_path)) is None
    assert theme.theme_path(None, "mine", str(tmp_path)) == os.path.join(str(tmp_path), "themes", "mine.json")
    assert theme.theme_path(None, "mine", str(tmp_path), no_themes=True) is None
