"""Run a piece of Python in a child process whose time and memory are bounded.

For tests of code that, when broken, spins while holding the GIL (a backtracking regex), blocks in the kernel
(a FIFO) or allocates without bound (``/dev/zero``): in the test's own process such a failure would hang or
kill the whole run; in a child it is a failed assertion with a reason. The child's address space is capped
with ``RLIMIT_AS`` and the wait with a generous time-out that only bounds a hang.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from typing import Any

HANG_TIMEOUT = 60.0  # seconds: only a hang takes this long, on any machine
MEMORY_LIMIT = 1 << 30


@dataclass
class Outcome:
    returncode: int | None  # None: killed at the time-out
    stdout: str
    stderr: str

    @property
    def result(self) -> Any:
        """The JSON value the script printed on its last stdout line (see ``report`` in the prelude)."""
        lines = [ln for ln in self.stdout.splitlines() if ln.strip()]
        assert lines, f"the child printed nothing (code {self.returncode}); stderr:\n{self.stderr[-3000:]}"
        return json.loads(lines[-1])

    def check(self) -> Any:
        assert self.returncode is not None, f"still running after {HANG_TIMEOUT} s (a hang); stderr:\n{self.stderr[-3000:]}"
        assert self.returncode == 0, f"exit code {self.returncode}; stderr:\n{self.stderr[-3000:]}"
        return self.result


PRELUDE = """
import asyncio, json, os, sys, threading, time
from pisces.ai.abort import AbortSignal

def report(value):
    print(json.dumps(value), flush=True)

def call(tool, params, signal=None):
    async def go():
        try:
            r = await tool.execute("call", params, signal or AbortSignal(), lambda u: None)
            return {"ok": True, "text": "".join(getattr(c, "text", "") for c in r.content),
                    "details": r.details if isinstance(r.details, dict) else None}
        except Exception as exc:
            return {"ok": False, "error": str(exc), "type": type(exc).__name__}
    return asyncio.run(go())
"""


def _limits(memory: int) -> Any:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        os.setsid()
    return apply


def run_python(script: str, *, timeout: float | None = None, memory: int = MEMORY_LIMIT, cwd: str | None = None,
               user: int | None = None, argv_prefix: list[str] | None = None, stdin: bytes | None = b"") -> Outcome:
    """Run ``PRELUDE + script`` with ``sys.executable``; ``user``: run as that uid (needs root);
    ``argv_prefix``: a wrapper such as ``["unshare", "--mount"]``."""
    # PISCES_TEST_HANG_TIMEOUT shortens the wait when a test is run against code known to hang
    timeout = float(os.environ.get("PISCES_TEST_HANG_TIMEOUT") or timeout or HANG_TIMEOUT)
    env = dict(os.environ, MALLOC_ARENA_MAX="2", PYTHONUNBUFFERED="1")
    code = PRELUDE + textwrap.dedent(script)
    argv = [*(argv_prefix or []), sys.executable, "-c", code]
    kwargs: dict[str, Any] = {}
    if user is not None:
        kwargs.update(user=user, group=user, extra_groups=[])
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                            env=env, preexec_fn=_limits(memory), **kwargs)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
        return Outcome(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            proc.kill()
        out, err = proc.communicate()
        return Outcome(None, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
