"""Render a screen capture with escapes (``tmux capture-pane -e``) to a PNG through pyte and Pillow, for
docs/tui.md: ``python dev/ansi_png.py in.ansi out.png [columns rows]``. Pillow is not a dependency of pisces
(install it where you run this)."""

from __future__ import annotations

import sys

import pyte
from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
COLOURS = {"black": (30, 30, 30), "red": (224, 108, 117), "green": (152, 195, 121), "yellow": (229, 192, 123),
           "blue": (97, 175, 239), "magenta": (198, 120, 221), "cyan": (86, 182, 194), "white": (220, 223, 228),
           "default": (220, 223, 228)}


def render(text: str, cols: int, rows: int) -> Image.Image:
    screen = pyte.Screen(cols, rows)
    stream = pyte.Stream(screen)
    stream.feed(text.replace("\n", "\r\n"))
    font = ImageFont.truetype(FONT, 15)
    cw, ch = 9, 19
    img = Image.new("RGB", (cols * cw + 16, rows * ch + 16), (30, 30, 30))
    draw = ImageDraw.Draw(img)
    for y in range(rows):
        for x in range(cols):
            c = screen.buffer[y][x]
            fg = COLOURS.get(c.fg, None) or _hex(c.fg) or COLOURS["default"]
            if c.bold:
                fg = tuple(min(255, v + 30) for v in fg)
            if getattr(c, "italics", False) or (c.fg == "default" and False):
                pass
            back = COLOURS.get(c.bg) if c.bg != "default" else None
            back = back or (_hex(c.bg) if c.bg != "default" else None)
            if back is not None and not c.reverse:  # a theme's background (selectedBg, userMessageBg, ...)
                draw.rectangle([8 + x * cw, 8 + y * ch, 8 + (x + 1) * cw, 8 + (y + 1) * ch], fill=back)
            if c.reverse:
                draw.rectangle([8 + x * cw, 8 + y * ch, 8 + (x + 1) * cw, 8 + (y + 1) * ch], fill=fg)
                fg = (30, 30, 30)
            if c.data.strip():
                draw.text((8 + x * cw, 8 + y * ch), c.data, font=font, fill=fg)
    return img


def _hex(value: str) -> tuple[int, int, int] | None:
    if len(value) == 6:
        try:
            return int(value[:2], 16), int(value[2:4], 16), int(value[4:], 16)
        except ValueError:
            return None
    return None


if __name__ == "__main__":
    src, dst = sys.argv[1], sys.argv[2]
    cols, rows = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (100, 30)
    with open(src, encoding="utf-8") as f:
        render(f.read(), cols, rows).save(dst)
