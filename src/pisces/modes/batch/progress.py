"""What a batch shows while it runs: one status line redrawn on a terminal, a line per finished item
otherwise (a log, CI); and the summary table at the end."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class Progress:
    def __init__(self, total: int, skipped: int, *, stream: TextIO | None = None, plain: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.plain = (not self.stream.isatty()) if plain is None else plain
        self.total, self.skipped = total, skipped
        self.done = self.ok = self.failed = self.running = 0
        self.cost = 0.0
        self.started = time.monotonic()

    def status(self) -> str:
        elapsed = time.monotonic() - self.started
        rate = self.done / elapsed * 60 if elapsed > 0 and self.done else 0.0
        left = self.total - self.skipped - self.done
        eta = _duration(left / (self.done / elapsed)) if self.done else "?"
        return (f"{self.skipped + self.done}/{self.total} done ({self.ok} ok, {self.failed} failed, "
                f"{self.running} running) · {rate:.1f}/min · ${self.cost:.4f} · ETA {eta}")

    def started_item(self) -> None:
        self.running += 1
        self._redraw()

    def finished(self, row: dict[str, Any]) -> None:
        self.running -= 1
        self.done += 1
        if row.get("status") == "succeeded":
            self.ok += 1
        else:
            self.failed += 1
        self.cost += float(row.get("cost") or 0)
        if self.plain:
            error = f" - {str(row['error']).splitlines()[0][:120]}" if row.get("error") else ""
            self.stream.write(f"[{self.skipped + self.done}/{self.total}] {row['id']}: {row['status']} "
                              f"({row.get('duration_ms', 0) / 1000:.1f} s, ${float(row.get('cost') or 0):.4f})"
                              f"{error}\n")
            self.stream.flush()
        else:
            self._redraw()

    def note(self, text: str) -> None:
        if not self.plain:
            self.stream.write("\r\x1b[2K")
        self.stream.write(text + "\n")
        self._redraw()

    def _redraw(self) -> None:
        if not self.plain:
            self.stream.write("\r\x1b[2K" + self.status())
            self.stream.flush()

    def close(self) -> None:
        if not self.plain:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


def summary_table(rows: list[dict[str, Any]]) -> str:
    """One row per item (id, status, files changed, verification, cost, time), then the totals."""
    head = ("id", "status", "files", "verify", "cost $", "time")
    body = []
    for row in rows:
        verification = row.get("verification")
        verify = "-" if not verification else ("passed" if verification.get("passed") else "failed")
        body.append((str(row["id"]), str(row["status"]), str(row.get("files_changed", "-")), verify,
                     f"{float(row.get('cost') or 0):.4f}", _duration((row.get("duration_ms") or 0) / 1000)))
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(head, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in body]
    by_status: dict[str, int] = {}
    for row in rows:
        by_status[row["status"]] = by_status.get(row["status"], 0) + 1
    total = sum(float(r.get("cost") or 0) for r in rows)
    lines.append(f"{len(rows)} items: " + ", ".join(f"{n} {s}" for s, n in sorted(by_status.items()))
                 + f"; cost ${total:.4f}")
    return "\n".join(lines)
