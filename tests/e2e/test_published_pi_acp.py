"""End to end with a published bridge: ``pi-acp`` 0.0.34 (npm), unchanged, runs pisces as its pi (``pisces
--mode rpc --no-themes``, through ``PI_ACP_PI_COMMAND``) and an ACP client session works: initialize, a new
session (which asks for ``get_available_thinking_levels``), a prompt streamed back as message chunks, and
``session/list`` finding the session in ``PI_CODING_AGENT_DIR`` (pi-acp reads the files itself).

The package is ``$PI_ACP_DIR``, or ``pi-acp`` under ``~/.cache/pisces-conformance/node_modules``, which the test
installs there with npm (once) when it is missing. Skipped, with the reason, without node or when npm cannot
install it.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time

import pytest
from e2eproc import PISCES

CACHE = os.environ.get("PISCES_CONFORMANCE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                  "pisces-conformance")


def _pi_acp() -> str:
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH: pi-acp cannot run")
    root = os.environ.get("PI_ACP_DIR") or os.path.join(CACHE, "node_modules", "pi-acp")
    entry = os.path.join(root, "dist", "index.js")
    if not os.path.isfile(entry) and not os.environ.get("PI_ACP_DIR") and shutil.which("npm"):
        os.makedirs(CACHE, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "pi-acp@0.0.34"],
                       cwd=CACHE, capture_output=True, timeout=600)  # once per machine
    if not os.path.isfile(entry):
        pytest.skip(f"pi-acp is not installed ({entry}); npm install pi-acp@0.0.34 in {CACHE} installs it")
    return entry


class Acp:
    def __init__(self, entry: str, env: dict, cwd: str) -> None:
        self.p = subprocess.Popen(["node", entry], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env, cwd=cwd, text=True)
        self.q: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [self.q.put(json.loads(line)) for line in self.p.stdout],
                         daemon=True).start()
        self.ids = 0

    def call(self, method: str, params: dict, timeout: float = 60) -> tuple[dict, list[dict]]:
        self.ids += 1
        rid = self.ids
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n")
        self.p.stdin.flush()
        notes, deadline = [], time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no answer to {method}; got {notes[-5:]}"
            try:
                msg = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if msg.get("id") == rid:
                return msg, notes
            notes.append(msg)

    def close(self) -> None:
        self.p.stdin.close()
        self.p.terminate()  # the bridge we started; it stops the pisces it started
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def test_pi_acp_drives_pisces(home, tmp_path):
    entry = _pi_acp()
    script = home.faux_script([{"text": "Hello from pisces"}])
    shim = tmp_path / "pisces-as-pi"
    shim.write_text(f"#!/bin/sh\nexec {' '.join(PISCES)} --faux-script {script} \"$@\"\n")
    shim.chmod(0o755)
    env = {k: v for k, v in home.env().items() if not k.startswith(("PISCES_", "PI_"))}
    env.update(PI_CODING_AGENT_DIR=home.agent_dir, PI_ACP_PI_COMMAND=str(shim))
    acp = Acp(entry, env, home.cwd)
    try:
        init, _ = acp.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert init["result"]["protocolVersion"] == 1, init
        new, _ = acp.call("session/new", {"cwd": home.cwd, "mcpServers": []})
        assert "error" not in new, new
        options = {o["id"]: o for o in new["result"]["configOptions"]}
        assert options["model"]["currentValue"] == "faux/faux"
        assert "thought_level" in options  # from get_available_thinking_levels
        sid = new["result"]["sessionId"]
        done, notes = acp.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        assert done["result"]["stopReason"] == "end_turn", done
        chunks = [n["params"]["update"]["content"]["text"] for n in notes
                  if n.get("method") == "session/update"
                  and n["params"]["update"].get("sessionUpdate") == "agent_message_chunk"]
        assert "".join(chunks).strip().endswith("Hello from pisces")
        listed, _ = acp.call("session/list", {"cwd": home.cwd})
        assert sid in [s["sessionId"] for s in listed["result"]["sessions"]], listed
    finally:
        acp.close()
