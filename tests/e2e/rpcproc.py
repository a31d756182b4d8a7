"""``RpcProc``: the small process wrapper that test_rpc_e2e.py uses, built on e2eproc.Proc.

    with RpcProc(["--provider", "faux", "--faux-script", path], home=str(tmp / "home"), cwd=str(work)) as p:
        p.next_frame()                       # {"type": "ready"}
        r = p.request({"id": "s", "type": "get_state"})
"""

from __future__ import annotations

import json
import os
import queue
import time
from typing import Any, Callable

from e2eproc import PISCES, Proc


class RpcProc(Proc):
    def __init__(self, args: list[str], *, home: str, cwd: str, env: dict[str, str] | None = None) -> None:
        os.makedirs(home, exist_ok=True)
        os.makedirs(cwd, exist_ok=True)
        full_env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        full_env.update(HOME=home, PISCES_CODING_AGENT_DIR=os.path.join(home, ".pisces", "agent"))
        full_env.update(env or {})
        super().__init__([*PISCES, "--mode", "rpc", *args], full_env, cwd)

    @property
    def proc(self) -> Any:
        return self.p

    def next_frame(self, timeout: float = 10.0) -> dict[str, Any]:
        """The next frame; a line that is not a JSON object comes back as ``{"__not_json__": line}``."""
        try:
            line = self._q.get(timeout=timeout)
        except queue.Empty:
            raise self._fail(f"no frame within {timeout} s") from None
        if line is None:
            self._eof = True
            raise self._fail(f"stdout ended (exit status {self.p.poll()})")
        try:
            frame = json.loads(line)
        except ValueError:
            frame = None
        if not isinstance(frame, dict):
            frame = {"__not_json__": line.decode("utf-8", "replace")}
        self.frames.append(frame)
        return frame

    def until(self, pred: Callable[[dict], bool], timeout: float = 10.0) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._fail(f"no matching frame within {timeout} s")
            got.append(self.next_frame(left))
            if pred(got[-1]):
                return got

    def send_raw(self, data: bytes) -> None:
        self.write(data + b"\n")

    def response(self, rid: Any, timeout: float = 10.0) -> dict[str, Any]:
        return self.until(lambda f: f.get("type") == "response" and f.get("id") == rid, timeout)[-1]

    def request(self, cmd: dict, timeout: float = 10.0) -> dict[str, Any]:
        self.send(cmd)
        return self.response(cmd.get("id"), timeout)
