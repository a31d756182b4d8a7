"""End to end: the default stream is pi's (``partial`` in every message_update), and a client can choose a
lean or a deltas-only stream with ``set_stream_options`` or ``--stream-profile``; ``--mode json`` starts with
the session header line, as pi's does."""

from __future__ import annotations

import json
import subprocess

from e2eproc import PISCES

REPLY = "word " * 200  # 1000 characters in 5-character chunks: 200 text_delta frames


def _reply_frames(p):
    p.ok({"type": "prompt", "message": "go"})
    return p.until_type("agent_settled", 30)


def _stdout_bytes(p, start: int) -> int:
    return sum(len(line) + 1 for line in p.raw_lines[start:])


def test_default_is_pis_frame_and_each_profile_can_be_chosen(home, spawn):
    p = spawn("--faux-script", home.faux_script({"responses": [{"text": REPLY, "chunkSize": 5}], "loop": True}))
    sizes = {}
    for profile in ("full", "lean", "deltas"):
        if profile != "full":
            data = p.ok({"type": "set_stream_options", "profile": profile})
            assert data == {"profile": profile, "partial": False, "messageSnapshots": profile == "lean", "seq": False}
        start = len(p.raw_lines)
        frames = _reply_frames(p)
        sizes[profile] = _stdout_bytes(p, start)
        updates = [f for f in frames if f["type"] == "message_update"]
        assert len(updates) == 202  # text_start, 200 deltas, text_end
        end = [f for f in frames if f["type"] == "message_end"][-1]["message"]
        assert end["content"] == [{"type": "text", "text": REPLY}]  # the whole message in every profile
        if profile == "full":
            assert all(u["assistantMessageEvent"]["partial"] == u["message"] for u in updates)
        elif profile == "lean":
            assert all("partial" not in u["assistantMessageEvent"] and "message" in u for u in updates)
        else:
            assert all(set(u) == {"type", "assistantMessageEvent"} for u in updates)
            assert "partial" not in json.dumps(updates)
            assert "".join(u["assistantMessageEvent"].get("delta", "") for u in updates) == REPLY
    # the snapshot counts twice, once, never: deltas output grows with the reply, not with its square
    assert sizes["deltas"] * 5 < sizes["lean"] < sizes["full"]
    assert p.close() == 0


def test_stream_options_booleans_and_bad_values(home, spawn):
    p = spawn("--provider", "faux", "--no-session", "--stream-profile", "deltas")
    assert p.ok({"type": "set_stream_options"}) == {"profile": "deltas", "partial": False,
                                                    "messageSnapshots": False, "seq": False}
    # an option left out keeps its current value
    assert p.ok({"type": "set_stream_options", "messageSnapshots": True}) == {
        "profile": "lean", "partial": False, "messageSnapshots": True, "seq": False}
    # seq: events numbered as the web host numbers them (pisces.modes.host.host); off again restores pi's frames
    assert p.ok({"type": "set_stream_options", "seq": True})["seq"] is True
    p.send({"id": "n", "type": "set_session_name", "name": "numbered"})
    numbered = p.until(lambda f: f.get("type") == "session_info_changed")[-1]
    assert isinstance(numbered["seq"], int) and numbered["seq"] >= 1
    assert p.ok({"type": "set_stream_options", "seq": False})["seq"] is False
    p.send({"id": "n2", "type": "set_session_name", "name": "plain"})
    assert "seq" not in p.until(lambda f: f.get("type") == "session_info_changed")[-1]
    assert p.ok({"type": "set_stream_options", "partial": True})["profile"] == "full"
    assert p.ok({"type": "set_stream_options", "partial": False})["profile"] == "lean"
    for bad in ({"profile": "huge"}, {"partial": "no"}, {"profile": "full", "partial": False}, {"seq": "yes"}):
        r = p.request({"id": "b", "type": "set_stream_options", **bad})
        assert r["success"] is False and r["error"], r
    assert p.ok({"type": "get_state"})["model"]["provider"] == "faux"  # still serving
    assert p.close() == 0


def test_json_mode_starts_with_the_session_header_and_streams_pis_frames(home):
    script = home.faux_script([{"text": "hi there", "chunkSize": 3}])
    r = subprocess.run([*PISCES, "--mode", "json", "--faux-script", script, "say hi"], capture_output=True,
                       env=home.env(), cwd=home.cwd, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    header = lines[0]
    assert list(header)[:2] == ["type", "version"] and header["type"] == "session" and header["version"] == 3
    assert header["cwd"] == home.cwd and header["id"] in home.session_files()[0]
    updates = [f for f in lines if f["type"] == "message_update"]
    assert updates and all(u["assistantMessageEvent"]["partial"] == u["message"] for u in updates)
    assert lines[-1]["type"] == "agent_settled"
