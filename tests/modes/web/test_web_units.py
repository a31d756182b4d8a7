"""In-process checks of the web mode's small parts: the replay buffer's bounds, the WebSocket framing the
fan-out writes itself (against the library's own encoder), pairing and the Origin/Host rules."""

from __future__ import annotations

import base64

import pytest
from websockets.frames import Frame, Opcode

from pisces.modes.host.host import with_seq
from pisces.modes.host.replay import ReplayBuffer
from pisces.modes.web.auth import WebAuth
from pisces.modes.web.devices import SIGNED_PREFIX, DeviceStore, device_name
from pisces.modes.web.port import ATTEMPTS, HIGH, LOW, candidates, configured_port
from pisces.modes.web.server import STATIC, safe_join, ws_frame


def frames(seq: int, size: int = 10) -> dict[str, bytes]:
    body = b'{"type":"e","n":"' + b"x" * size + b'"}\n'
    return {"deltas": body, "full": body + b""}


def test_replay_buffer_replays_exactly_what_was_missed():
    buf = ReplayBuffer(max_bytes=10_000, max_events=100)
    for seq in range(1, 11):
        buf.add(seq, frames(seq))
    got = buf.since(7, 10, "deltas")
    assert [s for s, _ in got] == [8, 9, 10]
    assert buf.since(10, 10, "deltas") == []  # up to date
    assert buf.since(11, 10, "deltas") is None  # a number this stream never reached
    assert buf.since(3, 10, "full") is None  # that profile was never kept


def test_replay_buffer_is_bounded_by_events_and_bytes():
    buf = ReplayBuffer(max_bytes=10_000, max_events=5)
    for seq in range(1, 21):
        buf.add(seq, frames(seq))
    assert len(buf) == 5 and buf.first_seq == 16
    assert buf.since(14, 20, "deltas") is None  # 15 is gone: a snapshot instead
    assert [s for s, _ in buf.since(15, 20, "deltas")] == [16, 17, 18, 19, 20]
    small = ReplayBuffer(max_bytes=300, max_events=1000)
    for seq in range(1, 21):
        small.add(seq, frames(seq, size=40))
    assert small.bytes <= 300 and small.first_seq > 1


@pytest.mark.parametrize("n", [0, 1, 125, 126, 127, 65535, 65536, 200_000])
def test_ws_frame_matches_the_library(n):
    payload = b"{" + b"a" * max(0, n - 2) + b"}" if n >= 2 else b"{" * n
    ours = ws_frame(payload + b"\n")
    theirs = Frame(Opcode.TEXT, payload).serialize(mask=False, extensions=[])
    assert ours == theirs


def test_with_seq_appends_the_number():
    assert with_seq(b'{"type":"agent_start"}\n', 42) == b'{"type":"agent_start","seq":42}\n'


def test_pairing_tokens_work_once_and_expire(tmp_path):
    now = [1000.0]
    auth = WebAuth(port=8000, host="127.0.0.1", token="t" * 32, clock=lambda: now[0],
                   devices=DeviceStore(str(tmp_path / "devices.json")))
    once = auth.new_pairing(None)
    ticket = auth.pair(once)
    assert ticket and not auth.device_ok([f"pisces.v1, pisces.device.{ticket}"])  # a ticket opens nothing
    secret = "s" * 43
    device = auth.register(ticket, origin="http://127.0.0.1:8000", secret=secret)
    assert not isinstance(device, str), device
    assert auth.register(ticket, origin="http://127.0.0.1:8000", secret=secret) == \
        "the pairing ticket is used or expired: open a new pairing link"
    assert auth.device_ok([f"pisces.v1, pisces.device.{secret}"]) and auth.bearer_ok(f"Bearer {secret}")
    assert not auth.device_ok([f"pisces.v1, pisces.device.{secret}"], origin="http://127.0.0.1:8001")
    assert not auth.program_ok(f"Bearer {secret}")  # a browser's secret: its connection must carry an Origin
    assert auth.pair(once) is None  # used up
    minted = auth.new_pairing(600)
    now[0] += 601
    assert auth.pair(minted) is None  # expired
    assert auth.pair("t" * 32) is not None and auth.pair("t" * 32) is not None  # the access token is not used up
    assert not auth.device_ok(["pisces.device.forged"]) and not auth.device_ok([]) and not auth.device_ok([secret])
    assert auth.bearer_ok("Bearer " + "t" * 32) and not auth.bearer_ok("Bearer " + "t" * 31) and not auth.bearer_ok(None)
    stored = (tmp_path / "devices.json").read_text()
    assert secret not in stored and oct((tmp_path / "devices.json").stat().st_mode & 0o777) == "0o600"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_key_device_proves_itself_once_per_challenge_and_is_refused_once_revoked(tmp_path):
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    key = ec.generate_private_key(ec.SECP256R1())
    point = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    store = DeviceStore(str(tmp_path / "devices.json"))
    auth = WebAuth(port=8000, host="127.0.0.1", devices=store)
    assert auth.register(auth.pair(auth.new_pairing()) or "", origin="http://127.0.0.1:8000", public_key="AAAA") \
        .startswith("pub is not")
    device = auth.register(auth.pair(auth.new_pairing()) or "", origin="http://127.0.0.1:8000",
                           public_key=_b64(point), user_agent="Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0 Safari/537")
    assert not isinstance(device, str) and device.name == "Chrome 131 on Linux"
    assert store.devices[device.id].publicKey == _b64(point)

    def proof(challenge: str) -> str:
        r, s = decode_dss_signature(key.sign(SIGNED_PREFIX + challenge.encode(), ec.ECDSA(hashes.SHA256())))
        return f"pisces.key.{device.id}.{challenge}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    good = proof(auth.new_challenge())
    assert auth.device([f"pisces.v1, {good}"], "http://127.0.0.1:8000") is not None
    assert auth.device([f"pisces.v1, {good}"], "http://127.0.0.1:8000") is None  # the challenge is used up
    assert auth.device([proof("made-up-challenge")]) is None  # not one the server gave
    other = auth.new_challenge()
    assert auth.device([proof(other).replace(other, auth.new_challenge())]) is None  # signs another challenge
    # another process (pisces web revoke) forgets it: the next check re-reads the file
    assert DeviceStore(str(tmp_path / "devices.json")).revoke(device.id)
    assert auth.device([proof(auth.new_challenge())]) is None


def test_origin_and_host_rules():
    auth = WebAuth(port=8000, host="127.0.0.1", origins=("https://box.example",))
    assert auth.origin_ok("http://127.0.0.1:8000") and auth.origin_ok("http://localhost:8000")
    assert auth.origin_ok("https://box.example") and not auth.origin_ok("http://127.0.0.1:8001")
    assert not auth.origin_ok("http://evil.example") and not auth.origin_ok(None) and not auth.origin_ok("null")
    assert auth.host_ok("127.0.0.1:8000") and auth.host_ok("LOCALHOST:8000") and auth.host_ok("box.example")
    assert not auth.host_ok("evil.example:8000") and not auth.host_ok(None)
    lan = WebAuth(port=8000, host="0.0.0.0", token="t" * 32)
    assert lan.host_ok("192.168.1.5:8000")  # bound to the network: names are the proxy's business, the token guards


def test_safe_join_stays_inside():
    assert safe_join(STATIC, "app.js") == (STATIC / "app.js").resolve()
    for bad in ("../host.py", "%2e%2e/host.py", "a/../../x", "/etc/passwd", "..%2fx", "a\\b", "x%00", "", "vendor//x"):
        assert safe_join(STATIC, bad) is None, bad


def test_the_projects_port_is_stable_and_the_configured_one_wins(tmp_path):
    ports = list(candidates(str(tmp_path)))
    assert len(ports) == len(set(ports)) == ATTEMPTS and all(LOW <= p < HIGH for p in ports)
    assert list(candidates(str(tmp_path) + "/.")) == ports  # the real path: the same directory, the same ports
    assert list(candidates(str(tmp_path / "other"))) != ports  # another project, other ports

    class Args:
        port = None

    assert configured_port(Args(), {"web.port": 8400}) == 8400
    assert configured_port(Args(), {"web.port": "8400"}) is None and configured_port(Args(), {}) is None
    Args.port = 0
    assert configured_port(Args(), {"web.port": 8400}) == 0  # --port wins, 0 included (any free port)


def test_a_corrupt_devices_file_counts_as_empty_and_is_replaced(tmp_path, capsys):
    path = tmp_path / "web-devices.json"
    path.write_text("{not json")
    store = DeviceStore(str(path))
    assert store.devices == {} and "unreadable" in capsys.readouterr().err
    device = store.add(kind="secret", origin="http://127.0.0.1:1", cwd="/p", user_agent="x" * 5000, secret="s" * 43)
    again = DeviceStore(str(path))
    assert list(again.devices) == [device.id] and again.by_secret("s" * 43) is not None
    assert again.by_secret("s" * 42) is None and not again.revoke("dnope000000")
    assert device_name("Mozilla/5.0 (iPhone; CPU iPhone OS 17_0) Version/17.0 Mobile/15E148 Safari/604.1") == \
        "Safari 17 on iPhone"
    assert device_name("\x1b[31m" * 100) == "a browser"
