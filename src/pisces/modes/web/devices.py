"""Remembered browsers: the paired devices of the web mode, kept across restarts in one private file.

``<agent dir>/web-devices.json`` (mode 0600, its directory 0700) holds, per device, nothing that opens the
session by itself:

- a **key** device (a browser with WebCrypto: ``http://127.0.0.1``/``localhost`` and ``https:``) keeps a
  non-extractable ECDSA P-256 key pair in its origin's IndexedDB; the file has the **public key** only. The
  page proves possession by signing a one-time challenge from the server (``/challenge``).
- a **secret** device (no WebCrypto: a phone on ``http://<LAN address>``, not a secure context) keeps a random
  secret in its origin's localStorage; the file has its **sha256** only.

Each device also records the origin it was paired on (a WebSocket from another Origin is refused), the
project directory, a short name from its User-Agent, when it was paired and last seen. Every change is a
read-modify-write under the agent dir's file lock and an atomic replace, so two pisces processes (two
projects) share the file without losing an entry. A process notices another's change (``pisces web revoke``)
by the file's stat (``refresh``); a revoked device is then refused and its sockets closed.

Bounded: at most ``MAX_DEVICES`` (the least recently seen go first), the file read is capped at 1 MiB, names
at 80 printable characters. A corrupt file counts as empty (said once on stderr) and is replaced at the next
pairing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from pisces.core.config.file_lock import FileLock
from pisces.core.config.paths import agent_dir
from pisces.core.safe_open import write_atomic

FILE_NAME = "web-devices.json"
MAX_DEVICES = 64
MAX_FILE = 1024 * 1024
SEEN_EVERY_S = 600.0  # lastSeen is written at most this often per device
SIGNED_PREFIX = b"pisces-web-device\n"  # + the challenge: what a key device signs
ID_RE = re.compile(r"^d[0-9a-f]{10}$")
B64URL_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def default_path() -> str:
    return os.path.join(agent_dir(), FILE_NAME)


def b64url_decode(text: str) -> bytes:
    if not B64URL_RE.match(text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def device_name(user_agent: str | None) -> str:
    """``Chrome 131 on Linux``-like, from a User-Agent header; ``a browser`` when it says nothing useful."""
    ua = user_agent or ""
    browser = None
    for pattern, label in ((r"Edg/(\d+)", "Edge"), (r"Firefox/(\d+)", "Firefox"), (r"HeadlessChrome/(\d+)",
                           "Headless Chrome"), (r"Chrome/(\d+)", "Chrome"), (r"Version/(\d+)[.\d]* .*Safari/",
                                                                             "Safari")):
        m = re.search(pattern, ua)
        if m:
            browser = f"{label} {m.group(1)}"
            break
    system = None
    for needle, label in (("Android", "Android"), ("iPhone", "iPhone"), ("iPad", "iPad"), ("Mac OS X", "macOS"),
                          ("Windows", "Windows"), ("CrOS", "ChromeOS"), ("Linux", "Linux")):
        if needle in ua:
            system = label
            break
    name = " on ".join(x for x in (browser or "a browser", system) if x)
    return "".join(c for c in name if c.isprintable())[:80]


@dataclass
class Device:
    id: str
    kind: str  # "key" or "secret"
    origin: str
    cwd: str
    name: str
    paired: float  # seconds since the epoch
    lastSeen: float  # the file's (and the protocol's) camelCase field
    publicKey: str = ""  # kind "key": the raw P-256 point, base64url
    secretHash: str = ""  # kind "secret": sha256 hex of the secret

    def public(self) -> dict[str, Any]:
        """What ``web_devices`` and ``pisces web devices`` show (no key material)."""
        return {"id": self.id, "kind": self.kind, "name": self.name, "origin": self.origin, "cwd": self.cwd,
                "paired": _iso(self.paired), "lastSeen": _iso(self.lastSeen)}


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class DeviceStore:
    def __init__(self, path: str | None = None) -> None:
        self.path = path or default_path()
        self.devices: dict[str, Device] = {}
        self._stamp: tuple[int, int, int] | None = None
        self._warned = False
        self.refresh()

    # -- the file --------------------------------------------------------------------------------
    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def refresh(self) -> bool:
        """Re-read the file if it changed since the last read; whether the set of devices changed."""
        stamp = self._stat()
        if stamp == self._stamp and (stamp is not None or not self.devices):
            return False
        self._stamp = stamp
        before = set(self.devices)
        self.devices = self._read()
        return set(self.devices) != before

    def _read(self) -> dict[str, Device]:
        try:
            with open(self.path, "rb") as f:
                data = json.loads(f.read(MAX_FILE + 1)[:MAX_FILE] or b"{}")
            out = {}
            for raw in data.get("devices", []):
                d = Device(**{k: raw[k] for k in Device.__dataclass_fields__ if k in raw})
                if ID_RE.match(d.id) and d.kind in ("key", "secret"):
                    out[d.id] = d
            return out
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            if not self._warned:
                self._warned = True
                sys.stderr.write(f"pisces: {self.path} is unreadable ({exc}): no browser is remembered until "
                                 "the next pairing replaces it\n")
            return {}

    def _update(self, change: Any) -> Any:
        """``change(devices)`` on the file's current devices, under the lock; the file written if it returns
        something other than ``False``; that value returned."""
        directory = os.path.dirname(self.path)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        with FileLock(self.path):
            self.devices = self._read()
            result = change(self.devices)
            if result is not False:
                kept = sorted(self.devices.values(), key=lambda d: d.lastSeen)[-MAX_DEVICES:]
                self.devices = {d.id: d for d in kept}
                body = json.dumps({"version": 1, "devices": [asdict(d) for d in kept]}, indent=1)
                write_atomic(self.path, body.encode() + b"\n", mode=0o600)
            self._stamp = self._stat()
        return result

    # -- changes ----------------------------------------------------------------------------------
    def add(self, *, kind: str, origin: str, cwd: str, user_agent: str | None, public_key: str = "",
            secret: str = "") -> Device:
        now = time.time()
        device = Device(id="d" + secrets.token_hex(5), kind=kind, origin=origin, cwd=cwd,
                        name=device_name(user_agent), paired=now, lastSeen=now, publicKey=public_key,
                        secretHash=secret_hash(secret) if secret else "")

        def change(devices: dict[str, Device]) -> None:
            devices[device.id] = device
        self._update(change)
        return device

    def revoke(self, device_id: str) -> bool:
        def change(devices: dict[str, Device]) -> bool:
            return devices.pop(device_id, None) is not None
        return bool(self._update(change))

    def seen(self, device_id: str) -> None:
        """Record a connection (written at most every ``SEEN_EVERY_S``)."""
        d = self.devices.get(device_id)
        if d is None or time.time() - d.lastSeen < SEEN_EVERY_S:
            return

        def change(devices: dict[str, Device]) -> bool:
            cur = devices.get(device_id)
            if cur is None:
                return False
            cur.lastSeen = time.time()
            return True
        try:
            self._update(change)
        except OSError:
            pass  # a read-only agent dir: the device still works

    # -- checks -----------------------------------------------------------------------------------
    def by_secret(self, secret: str) -> Device | None:
        """The secret device whose hash matches (every one compared, no early exit)."""
        digest = secret_hash(secret).encode()
        found = None
        for d in self.devices.values():
            if d.kind == "secret" and hmac.compare_digest(digest, d.secretHash.encode()):
                found = d
        return found

    def verify_key(self, device_id: str, challenge: str, signature: str) -> Device | None:
        """The key device ``device_id`` when ``signature`` (P1363 r||s, base64url) signs the challenge."""
        d = self.devices.get(device_id)
        if d is None or d.kind != "key":
            return None
        try:
            sig = b64url_decode(signature)
            point = b64url_decode(d.publicKey)
        except ValueError:
            return None
        return d if verify_p256(point, sig, SIGNED_PREFIX + challenge.encode()) else None


def verify_p256(point: bytes, signature: bytes, data: bytes) -> bool:
    """ECDSA P-256 with SHA-256, as WebCrypto signs (the raw r||s form), against an uncompressed point."""
    from cryptography.exceptions import InvalidSignature  # noqa: PLC0415 - loaded when a key device connects
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415 - as above
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415 - as above
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature  # noqa: PLC0415 - as above

    if len(signature) != 64 or len(point) != 65:
        return False
    try:
        key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
        key.verify(der, data, ec.ECDSA(hashes.SHA256()))
        return True
    except (InvalidSignature, ValueError):
        return False


def check_public_key(text: str) -> bool:
    """Whether ``text`` is a base64url uncompressed P-256 point that lies on the curve."""
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415 - loaded when a key device pairs

    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b64url_decode(text))
        return True
    except ValueError:
        return False
