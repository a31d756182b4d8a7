"""A real terminal for the TUI's end-to-end tests: tmux on a private socket, an interactive bash in a pane,
captures of the screen, bounded waits. Every server started is killed by ``close``."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid

PROMPT = "tuitest$ "  # (captures drop the trailing space)


class Tmux:
    def __init__(self, cwd: str, env: dict[str, str], width: int = 100, height: int = 30) -> None:
        env = {**env, "PS1": PROMPT}
        if shutil.which("tmux") is None:
            raise RuntimeError("tmux is not installed (apt-get install tmux)")
        self.socket = f"pisces-tui-{uuid.uuid4().hex[:8]}"
        self.env = env
        self.cwd = cwd
        self._tmux("new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), "-c", cwd,
                   "bash --norc --noprofile -i")
        self.wait_for("#" if os.getuid() == 0 else "$", 20)
        self.text(f"PS1='{PROMPT}'; cd {cwd}\n")
        self.wait_for(PROMPT.strip(), 20)

    def _tmux(self, *args: str) -> str:
        r = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, env=self.env,
                           timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"tmux {args[0]}: {r.stderr}")
        return r.stdout

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "t", *keys)

    def text(self, text: str) -> None:
        self._tmux("send-keys", "-t", "t", "-l", text)

    def screen(self, escapes: bool = False) -> str:
        return self._tmux("capture-pane", "-t", "t", "-p", *(["-e"] if escapes else []))

    def history(self) -> str:
        return self._tmux("capture-pane", "-t", "t", "-p", "-S", "-", "-E", "-")

    def resize(self, width: int, height: int) -> None:
        self._tmux("resize-window", "-t", "t", "-x", str(width), "-y", str(height))

    def wait_for(self, needle: str, timeout: float = 30, *, history: bool = False) -> str:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            last = self.history() if history else self.screen()
            if needle in last:
                return last
            time.sleep(0.1)
        raise AssertionError(f"{needle!r} did not appear within {timeout}s; the screen:\n{last}")

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.screen(escapes=True))

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)
        sock = os.path.join(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}", self.socket)
        if os.path.exists(sock):
            os.unlink(sock)
