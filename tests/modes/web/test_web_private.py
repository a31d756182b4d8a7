"""What another local user can see of a running web mode (issue 26, item 3), against the real process: the
files it writes (the session, settings) are the owner's alone, nothing lands in the project directory, the
listening socket is on loopback only, and the command line holds no secret."""

from __future__ import annotations

import json
import os
import stat

from webproc import WebProc


def _listening(port: int) -> list[str]:
    """The local addresses (hex, as /proc/net/tcp* writes them) listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            addr, _, hexport = cols[1].partition(":")
            if cols[3] == "0A" and int(hexport, 16) == port:  # 0A: LISTEN
                found.append(addr)
    return found


def test_what_the_web_mode_writes_is_private_and_it_listens_on_loopback_only(home):
    before_cwd = sorted(os.listdir(home.cwd))
    os.chmod(home.agent_dir, 0o755)  # made by the test: the dirs and files below it are pisces' own
    script = home.faux_script([{"text": "hello there"}], name="faux.json")
    old = os.umask(0o022)  # the common default, under which a plain open() makes world-readable files
    try:
        w = WebProc(home, "--provider", "faux", "--faux-script", script)
    finally:
        os.umask(old)
    with w:
        ws = w.ws()
        w.recv(ws)
        ws.send(json.dumps({"id": "p", "type": "prompt", "message": "hi"}))
        w.until(ws, lambda f: f.get("type") == "agent_settled")
        assert w.request(ws, {"type": "set_thinking_level", "level": "high"})["success"]
        assert w.request(ws, {"type": "web_pair"})["success"]
        assert w.http("/export", {"Authorization": f"Bearer {w.token}"})[0] == 200
        ws.close()
        with open(f"/proc/{w.p.pid}/cmdline", "rb") as f:
            cmdline = f.read()
        assert w.token.encode() not in cmdline
        listening = _listening(w.port)
        assert listening and all(a in ("0100007F", "00000000000000000000000001000000") for a in listening), listening
    loose = []
    for root, dirs, files in os.walk(home.agent_dir):
        for name in dirs + files:
            path = os.path.join(root, name)
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            if mode & 0o077:
                loose.append(f"{os.path.relpath(path, home.agent_dir)} {mode:o}")
    walked = [os.path.relpath(os.path.join(r, n), home.agent_dir) for r, d, fs in os.walk(home.agent_dir) for n in fs]
    assert any(p.endswith(".jsonl") for p in walked), walked  # the session was really written
    assert not loose, loose
    assert sorted(os.listdir(home.cwd)) == before_cwd  # nothing written into the project
