"""Who may use the web mode: pairing links, the browser's device secret, the token for programs, Origin and Host.

- A **pairing token** is good for one use: ``/pair?token=…`` trades it for a device secret (in a page that
  stores it in the origin's own ``localStorage``). The first is printed at start-up; a paired client can mint
  more (``web_pair``), which expire after ten minutes unused.
- The **device secret** is bound to the origin (scheme, host and port): the browser keeps it in the storage
  of ``http://<host>:<port>`` only, and the page presents it itself, in the WebSocket handshake as the
  subprotocol ``pisces.device.<secret>`` (beside ``pisces.v1``, the one the server selects) or as
  ``Authorization: Bearer <secret>`` on a fetch. Nothing is sent by the browser on its own: there is no
  cookie (cookies are not isolated by port: every server on 127.0.0.1 would receive it). Valid for this
  process only.
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

PAIRING_TTL_S = 600.0  # a minted pairing link unused for this long is gone
MAX_PAIRINGS = 16  # outstanding pairing links; the oldest go first
MAX_DEVICES = 256  # paired browsers; the oldest go first
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
SUBPROTOCOL = "pisces.v1"  # the one the server selects when a browser offers it
DEVICE_PREFIX = "pisces.device."  # + the device secret: the other subprotocol a paired page offers


def is_loopback(host: str) -> bool:
    if host in ("localhost", "::1", "[::1]"):
        return True
    parts = host.split(".")
    return len(parts) == 4 and parts[0] == "127" and all(p.isdigit() for p in parts)


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def _any_same(candidate: str, secrets_: Iterable[str]) -> bool:
    found = False
    for s in secrets_:  # no early exit: the time does not depend on which one matched
        found |= _same(candidate, s)
    return found


class WebAuth:
    def __init__(self, *, port: int, host: str, token: str | None = None, origins: Iterable[str] = (),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.port = port
        self.bind_host = host
        self.token = token or secrets.token_urlsafe(32)
        self.token_given = token is not None
        self._clock = clock
        self._pairings: dict[str, float | None] = {}  # token -> expiry (None: until used)
        self._devices: list[str] = []
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
        while len(self._pairings) > MAX_PAIRINGS:
            del self._pairings[next(iter(self._pairings))]
        return token

    def pair(self, candidate: str) -> str | None:
        """A new device secret when ``candidate`` is an unused, unexpired pairing token (used up now) or the
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
        secret = secrets.token_urlsafe(32)
        self._devices.append(secret)
        del self._devices[:-MAX_DEVICES]
        return secret

    # -- checks ------------------------------------------------------------------------------------
    def device_ok(self, protocols: Iterable[str]) -> bool:
        """Whether the ``Sec-WebSocket-Protocol`` values offer ``pisces.device.<secret>`` of a paired browser."""
        found = False
        for header in protocols:
            for offered in header.split(","):
                offered = offered.strip()
                if offered.startswith(DEVICE_PREFIX):
                    found |= _any_same(offered[len(DEVICE_PREFIX):], self._devices)
        return found

    def bearer_ok(self, authorization: str | None) -> bool:
        """The access token, or a paired browser's device secret (the page's own fetches send it)."""
        if not authorization or not authorization[:7].lower() == "bearer ":
            return False
        value = authorization[7:].strip()
        return _same(value, self.token) | _any_same(value, self._devices)

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
