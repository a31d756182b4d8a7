"""``RpcProc``: the small process wrapper that test_rpc_e2e.py uses, built on e2eproc.Proc.

    with RpcProc(["--provider", "faux", "--faux-script", path], home=str(tmp / "home"), cwd=str(work)) as p:
        p.next_frame()                       # {"type": "ready"}
        r = p.request({"id": "s", "type": "get_state"})
"""

from __future__ import annotations

import json
import os
from typing import Any

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

    def _frame(self, line: bytes) -> dict[str, Any]:
        """A line that is not a JSON object comes back as ``{"__not_json__": line}`` (the tests check it)."""
        try:
            frame = json.loads(line)
        except ValueError:
            frame = None
        return frame if isinstance(frame, dict) else {"__not_json__": line.decode("utf-8", "replace")}

    def next_frame(self, timeout: float = 10.0) -> dict[str, Any]:
        return self.next(timeout)

    def send_raw(self, data: bytes) -> None:
        self.write(data + b"\n")

    def response(self, rid: Any, timeout: float = 10.0) -> dict[str, Any]:
        return self.until(lambda f: f.get("type") == "response" and f.get("id") == rid, timeout)[-1]

    def request(self, cmd: dict, timeout: float = 10.0) -> dict[str, Any]:
        self.send(cmd)
        return self.response(cmd.get("id"), timeout)
