import os
import re
import uuid

from pisces.core.store import (
    agent_dir,
    default_session_dir,
    encode_cwd,
    iso_from_ms,
    iso_to_ms,
    resolve_session_dir,
    session_file_name,
    sessions_root,
    uuid7,
)
from pisces.core.store import ids as ids_module


def test_encode_cwd_like_pi():
    assert encode_cwd("/tmp/pi-drive/work/02_prompt_text") == "--tmp-pi-drive-work-02_prompt_text--"
    assert encode_cwd("C:\\Users\\me\\proj") == "--C--Users-me-proj--"
    assert encode_cwd("\\srv\\x") == "--srv-x--"
    assert encode_cwd("/") == "----"


def test_agent_dir_and_session_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", str(tmp_path / "agent"))
    assert agent_dir() == str(tmp_path / "agent")
    assert sessions_root() == str(tmp_path / "agent" / "sessions")
    assert default_session_dir("/a/b") == str(tmp_path / "agent" / "sessions" / "--a-b--")
    monkeypatch.delenv("PISCES_CODING_AGENT_SESSION_DIR", raising=False)
    assert resolve_session_dir("/a/b") == default_session_dir("/a/b")
    assert resolve_session_dir("/a/b", settings_session_dir="/from/settings") == "/from/settings"
    monkeypatch.setenv("PISCES_CODING_AGENT_SESSION_DIR", "/from/env")
    assert resolve_session_dir("/a/b", settings_session_dir="/from/settings") == "/from/env"
    assert resolve_session_dir("/a/b", explicit="rel/dir", settings_session_dir="/s") == "/a/b/rel/dir"
    monkeypatch.setenv("PISCES_CODING_AGENT_DIR", "~/custom")
    assert agent_dir() == os.path.join(os.path.expanduser("~"), "custom")
    monkeypatch.delenv("PISCES_CODING_AGENT_DIR")
    assert agent_dir() == os.path.join(os.path.expanduser("~"), ".pisces", "agent")


def test_file_name():
    assert (session_file_name("2026-11-21T22:36:42.990Z", "01a20041-346e-70c2-a15d-2017c73f2981")
            == "2026-11-21T22-36-42-990Z_01a20041-346e-70c2-a15d-2017c73f2981.jsonl")


def test_uuid7_layout_and_order(monkeypatch):
    ids = [uuid7() for _ in range(5000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for s in ids[:50]:
        u = uuid.UUID(s)
        assert u.version == 7 and u.variant == uuid.RFC_4122
    ms = 1795300602990
    monkeypatch.setattr(ids_module, "_last_ms", 0)
    u = uuid.UUID(uuid7(ms))
    assert u.int >> 80 == ms and str(u).startswith("01a20041-346e-7")
    # a clock that goes backwards never breaks the order
    assert uuid7(ms - 10_000) > str(u)


def test_iso_round_trip():
    assert iso_from_ms(1795300602990) == "2026-11-21T22:36:42.990Z"
    assert iso_to_ms("2026-11-21T22:36:42.990Z") == 1795300602990
    assert iso_to_ms("2026-11-21T22:36:42.001Z") == 1795300602001
    assert iso_to_ms("garbage") == 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", iso_from_ms(0))
