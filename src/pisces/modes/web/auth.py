"""Who may use the web mode: pairing links, remembered browsers, the token for programs, Origin and Host.

- A **pairing token** is good for one use: ``/pair?token=…`` trades it for a **ticket** (in a page, ``pair.js``)
  that registers this browser once, within ``TICKET_TTL_S``: ``/pair/register?ticket=…&origin=…`` with
  ``pub=<P-256 public key>`` (the page made a non-extractable key pair with WebCrypto and keeps it in its
  origin's IndexedDB) or, where WebCrypto is missing (a plain-http LAN address), ``secret=<random>`` (kept in
  its origin's localStorage). The device is remembered in a private file (:mod:`pisces.modes.web.devices`:
  the public key or the secret's hash, never anything that opens the session by itself) and survives
  restarts. The first pairing token is printed at start-up; a paired client can mint more (``web_pair``),
  which expire after ten minutes unused.
- A **key device** proves itself on every connection: it fetches a one-time challenge (``/challenge``, valid
  ``CHALLENGE_TTL_S``, used up by its first use) and presents ``pisces.key.<id>.<challenge>.<signature>``
  as a WebSocket subprotocol (or ``Authorization: Bearer key.<id>.<challenge>.<signature>`` on a fetch). A
  **secret device** presents ``pisces.device.<secret>`` (or ``Bearer <secret>``). Both are offered beside
  ``pisces.v1``, the one the server selects, so nothing secret is echoed. The browser sends none of this on
  its own (there is no cookie: cookies are not isolated by port), and a WebSocket from another Origin than
  the one the device paired on is refused.
- The **access token** (``--web-token-file``, ``PISCES_WEB_TOKEN``, else a random one) is for programs:
  ``Authorization: Bearer <token>`` on any request, the WebSocket upgrade included. It also works as a
  pairing token on the login page, without being used up.
- A browser's WebSocket must come from an allowed **Origin** (this server's own addresses, plus
  ``--web-origin``); a request bound to a loopback address must name a loopback **Host** (no DNS rebinding).

Every secret is compared with ``hmac.compare_digest``.
"""

from __future__ import annotations

import hmac
import secrets
import time
from typing import Any, Callable, Iterable, Sequence

from websockets.typing import Subprotocol

from pisces.modes.web.devices import B64URL_RE, Device, DeviceStore, check_public_key

PAIRING_TTL_S = 600.0  # a minted pairing link unused for this long is gone
TICKET_TTL_S = 300.0  # a pairing page registers its browser within this long
CHALLENGE_TTL_S = 60.0  # a challenge is answered within this long
MAX_PAIRINGS = 16  # outstanding pairing links; the oldest go first
MAX_TICKETS = 16
MAX_CHALLENGES = 256  # outstanding challenges (an open route): the oldest go first
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
SUBPROTOCOL = "pisces.v1"  # the one the server selects when a browser offers it
DEVICE_PREFIX = "pisces.device."  # + a secret device's secret
KEY_PREFIX = "pisces.key."  # + <id>.<challenge>.<signature> of a key device
KEY_BEARER = "key."  # the same proof on a fetch: Authorization: Bearer key.<id>.<challenge>.<signature>


def is_loopback(host: str) -> bool:
    if host in ("localhost", "::1", "[::1]"):
        return True
    parts = host.split(".")
    return len(parts) == 4 and parts[0] == "127" and all(p.isdigit() for p in parts)


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def _take(table: dict[str, float], candidate: str, now: float) -> bool:
    """Whether ``candidate`` is an unexpired entry of ``table`` (removed now: used up). Expired ones go."""
    for key, expiry in list(table.items()):
        if expiry < now:
            del table[key]
    match = None
    for key in table:  # no early exit
        if _same(candidate, key):
            match = key
    if match is None:
        return False
    del table[match]
    return True


def _bounded(table: dict[str, Any], limit: int) -> None:
    while len(table) > limit:
        del table[next(iter(table))]


class WebAuth:
    def __init__(self, *, port: int, host: str, token: str | None = None, origins: Iterable[str] = (),
                 clock: Callable[[], float] = time.monotonic, devices: DeviceStore | None = None,
                 cwd: str = "") -> None:
        self.port = port
        self.bind_host = host
        self.token = token or secrets.token_urlsafe(32)
        self.token_given = token is not None
        self._clock = clock
        self._pairings: dict[str, float | None] = {}  # token -> expiry (None: until used)
        self._tickets: dict[str, float] = {}
        self._challenges: dict[str, float] = {}
        self.devices = devices if devices is not None else DeviceStore()
        self.cwd = cwd
        names = list(LOOPBACK_NAMES)
        if not is_loopback(host) and host not in ("0.0.0.0", "::"):
            names.append(f"[{host}]" if ":" in host else host)
        self.origins = {f"http://{n}:{port}" for n in names} | {o.rstrip("/") for o in origins}
        self.hosts = {f"{n}:{port}" for n in LOOPBACK_NAMES}
        for origin in origins:
            self.hosts.add(origin.split("://", 1)[-1].rstrip("/"))

    # -- pairing ---------------------------------------------------------------------------------
    def new_pairing(self, ttl_s: float | None = PAIRING_TTL_S) -> str:
        token = secrets.token_urlsafe(24)
        self._pairings[token] = None if ttl_s is None else self._clock() + ttl_s
        _bounded(self._pairings, MAX_PAIRINGS)
        return token

    def pair(self, candidate: str) -> str | None:
        """A registration ticket when ``candidate`` is an unused, unexpired pairing token (used up now) or the
        access token; None otherwise."""
        now = self._clock()
        for token, expiry in list(self._pairings.items()):
            if expiry is not None and expiry < now:
                del self._pairings[token]
        match = None
        for token in list(self._pairings):
            if _same(candidate, token):
                match = token
        if match is not None:
            del self._pairings[match]
        elif not _same(candidate, self.token):
            return None
        ticket = secrets.token_urlsafe(24)
        self._tickets[ticket] = now + TICKET_TTL_S
        _bounded(self._tickets, MAX_TICKETS)
        return ticket

    def register(self, ticket: str, *, origin: str, public_key: str = "", secret: str = "",
                 user_agent: str | None = None) -> Device | str:
        """Remember the browser that holds ``ticket`` (used up now): its public key, or its secret's hash.
        The device, or why not (a sentence)."""
        if not self.origin_ok(origin):
            return "that origin is not this server's"
        if bool(public_key) == bool(secret):
            return "give pub (a P-256 public key) or secret"
        if public_key and not (len(public_key) < 200 and check_public_key(public_key)):
            return "pub is not a P-256 public key (uncompressed point, base64url)"
        if secret and not (32 <= len(secret) <= 200 and B64URL_RE.match(secret)):
            return "secret must be 32 to 200 base64url characters"
        if not _take(self._tickets, ticket, self._clock()):
            return "the pairing ticket is used or expired: open a new pairing link"
        return self.devices.add(kind="key" if public_key else "secret", origin=origin.rstrip("/"), cwd=self.cwd,
                                user_agent=user_agent, public_key=public_key, secret=secret)

    def new_challenge(self) -> str:
        challenge = secrets.token_urlsafe(24)
        self._challenges[challenge] = self._clock() + CHALLENGE_TTL_S
        _bounded(self._challenges, MAX_CHALLENGES)
        return challenge

    # -- checks ------------------------------------------------------------------------------------
    def _proof(self, proof: str) -> Device | None:
        """The key device whose ``<id>.<challenge>.<signature>`` is good (the challenge is used up)."""
        parts = proof.split(".")
        if len(parts) != 3 or not _take(self._challenges, parts[1], self._clock()):
            return None
        self.devices.refresh()
        return self.devices.verify_key(parts[0], parts[1], parts[2])

    def device(self, protocols: Iterable[str], origin: str | None = None) -> Device | None:
        """The paired browser whose credential the ``Sec-WebSocket-Protocol`` values offer (a key device's
        proof or a secret device's secret), when it paired on ``origin``; None otherwise."""
        found = None
        for header in protocols:
            for offered in header.split(","):
                offered = offered.strip()
                if offered.startswith(KEY_PREFIX):
                    found = self._proof(offered[len(KEY_PREFIX):]) or found
                elif offered.startswith(DEVICE_PREFIX):
                    self.devices.refresh()
                    found = self.devices.by_secret(offered[len(DEVICE_PREFIX):]) or found
        if found is not None and origin is not None and origin.rstrip("/") != found.origin:
            return None
        return found

    def device_ok(self, protocols: Iterable[str], origin: str | None = None) -> bool:
        return self.device(protocols, origin) is not None

    def bearer_device(self, authorization: str | None) -> Device | None:
        """The paired browser whose proof or secret is in ``Authorization: Bearer`` (the page's own fetches)."""
        if not authorization or not authorization[:7].lower() == "bearer ":
            return None
        value = authorization[7:].strip()
        if value.startswith(KEY_BEARER):
            return self._proof(value[len(KEY_BEARER):])
        self.devices.refresh()
        return self.devices.by_secret(value)

    def bearer_ok(self, authorization: str | None) -> bool:
        """The access token, or a paired browser's proof or secret (the page's own fetches send it)."""
        return self.program_ok(authorization) or self.bearer_device(authorization) is not None

    def program_ok(self, authorization: str | None) -> bool:
        """The access token itself (a program: it may connect without an Origin)."""
        if not authorization or not authorization[:7].lower() == "bearer ":
            return False
        return _same(authorization[7:].strip(), self.token)

    def origin_ok(self, origin: str | None) -> bool:
        return origin is not None and origin.rstrip("/") in self.origins

    def host_ok(self, host_header: str | None) -> bool:
        """Bound to loopback, only loopback names (or those of ``--web-origin``) may be asked for."""
        if not is_loopback(self.bind_host):
            return True
        return host_header is not None and host_header.lower() in self.hosts


def select_subprotocol(_conn: Any, offered: Sequence[Subprotocol]) -> Subprotocol | None:
    """The subprotocol the server answers: ``pisces.v1`` when offered (never the secret one), else none."""
    return Subprotocol(SUBPROTOCOL) if SUBPROTOCOL in offered else None
