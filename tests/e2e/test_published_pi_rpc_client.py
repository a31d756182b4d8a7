"""End to end with a published client: pi 0.73.1's own TypeScript ``RpcClient`` (from the npm package, unchanged)
drives the real ``pisces --mode rpc`` through every flow of pi-mono's ``test/rpc.test.ts``, the client's other
methods as pi's docs describe them, and the newer pi commands (tests/e2e/published/pi_rpc_client_flows.mjs).

As in pi's own test, the client sets ``PI_CODING_AGENT_DIR`` (not pisces' variable) and reads the session files
it expects there, and it asks for ``--provider anthropic --model claude-sonnet-4-5``: models.json points that
provider at a scripted Anthropic-wire server on 127.0.0.1 whose replies depend on what the model is sent (the
bash output only reaches the answer if pisces put it in the context). The client runs ``node <cliPath>``;
cliPath is a small shim that runs pisces. Skipped, with the reason, without node or the pi package.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest
from e2eproc import PISCES

from scripted_server import Recorded, Reply, ScriptedServer
from shared_paths import SHARED

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "published")
PI_PACKAGE = os.path.join(os.environ.get("PISCES_CONFORMANCE_CACHE")
                          or os.path.join(os.path.expanduser("~"), ".cache", "pisces-conformance"),
                          "node_modules", "@mariozechner", "pi-coding-agent")
RPC_CLIENT = os.path.join(PI_PACKAGE, "dist", "modes", "rpc", "rpc-client.js")
INSTALL_PI = os.path.join(SHARED, "conformance", "install_pi.sh")


def _texts(body: dict) -> list[str]:
    out = []
    for m in body.get("messages", []):
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
        else:
            out.extend(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")
    return out


def answer(body: dict) -> str:
    """What the scripted model says: it follows "Reply with just ..." and reads echo output from its context."""
    texts = _texts(body)
    last = texts[-1] if texts else ""
    if "exact output of the echo command" in last:
        ran = [m.group(1) for t in texts for m in re.finditer(r"Ran `echo ([^`]+)`", t)]
        return ran[-1] if ran else "I was not shown any output"
    m = re.search(r"Reply with just(?: the word)?:? '?([^'\n]+?)'?$", last)
    if m:
        return m.group(1)
    return "Hello! How can I help?"


def anthropic_reply(rec: Recorded) -> Reply:
    text = answer(rec.body if isinstance(rec.body, dict) else {})
    slow = "Write slowly" in (_texts(rec.body)[-1:] or [""])[0]
    pieces = [text[i:i + 4] for i in range(0, len(text), 4)] if not slow else ["slow "] * 400
    events = [{"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 120, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
    events += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
               for p in pieces]
    events += [{"type": "content_block_stop", "index": 0},
               {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": len(pieces)}},
               {"type": "message_stop"}]
    return Reply.sse(events, named=True, delay=0.01 if slow else 0.0)


def test_pi_rpc_client_drives_pisces(tmp_path):
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH: pi's RpcClient cannot run")
    if not os.path.isfile(RPC_CLIENT) and os.path.isfile(INSTALL_PI) and shutil.which("npm"):
        subprocess.run(["bash", INSTALL_PI], capture_output=True, timeout=600)  # npm install, once
    if not os.path.isfile(RPC_CLIENT):
        pytest.skip(f"pi 0.73.1 is not installed ({RPC_CLIENT}); ../shared/conformance/install_pi.sh installs it")
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedServer() as server:
        server.fallback = anthropic_reply
        models = {"providers": {"anthropic": {"baseUrl": server.url}}}
        env = {k: v for k, v in os.environ.items()
               if not k.endswith("_API_KEY") and not k.startswith(("PISCES_", "PI_"))}
        env.update(HOME=str(tmp_path), ANTHROPIC_API_KEY="test-key", PI_RPC_CLIENT=RPC_CLIENT,
                   PISCES_SHIM=os.path.join(HERE, "pisces_shim.cjs"), PISCES_BIN=json.dumps(PISCES),
                   WORK_CWD=str(work), MODELS_JSON=json.dumps(models))
        r = subprocess.run(["node", os.path.join(HERE, "pi_rpc_client_flows.mjs")], capture_output=True, text=True,
                           env=env, cwd=str(work), timeout=600)
    results = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    failed = [f"{x['flow']}: {x['error']}\n{x.get('stderr', '')[-800:]}" for x in results if not x["ok"]]
    assert not failed, "\n\n".join(failed)
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(results) == 18, [x["flow"] for x in results]
    # the bash output reached the model: the scripted server saw it in the request it answered from
    assert any("Ran `echo unique-" in json.dumps(req.body) for req in server.requests)
