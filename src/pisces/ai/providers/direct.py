"""Direct sending: a provider's streamed request through httpx2 alone, without importing the vendor's SDK.

The vendors' SDKs take 0.8-2.5 s to import (their thousands of type models), which a program that starts
pisces and prompts at once would wait for on its first reply. pisces parses the SSE body itself in any case;
what it takes from an SDK is the request (URL, auth, the SDK's headers), the retries and the errors. The
providers send through this module instead, which:

- sends the request the SDK would send: the same method, URL, body and headers (``User-Agent``, the
  ``X-Stainless-*`` set, auth, ``anthropic-version`` read from the installed SDK's own constants), through an
  httpx2 client configured as the SDK's default one (timeouts, connection limits, redirects) with pisces'
  bounded body reader (``_limits.http_client_options``);
- retries as the SDK does: connection errors, timeouts, and 408/409/429/5xx (``x-should-retry`` obeyed),
  after ``retry-after-ms``/``retry-after`` up to two minutes, else 0.5 s doubling to 8 s with 25% jitter,
  ``maxRetries`` times, counting in ``x-stainless-retry-count``;
- raises :class:`StatusError`, :class:`TimeoutFailure` or :class:`ConnectionFailure`, which carry what the
  SDK's errors carry (status, response, parsed body), so the providers word them identically.

The SDK is not needed afterwards either: importing it on an idle thread (as pisces did until it measured
this) takes a second of processor and 30-40 MB, and a prompt sent meanwhile shared the interpreter with that
import (a 2000-event reply took twice as long). What this module cannot reproduce (a version of the SDK whose
constants it cannot read) makes :func:`use_direct` say no: the request then goes through the SDK.
``tests/ai/test_direct_transport.py`` checks the request header for header against the SDK's and runs the
providers' scripted-server tests through this path.

``PISCES_PROVIDER_TRANSPORT``: ``auto`` (the default) and ``direct`` send through this module whenever it can
(the SDK is then never imported for these APIs), ``sdk`` always through the SDK.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import importlib.util
import json
import math
import os
import random
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any, AsyncIterator

from pisces.ai.providers._limits import http_client_options
from pisces.ai.providers._memo import JsonBody
from pisces.ai.providers._shared import cached_client

INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
MAX_RETRY_AFTER_DELAY = 120.0
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0


class StatusError(Exception):
    """A 4xx/5xx reply (after the retries): ``status_code``, ``response`` (body read, bounded), ``body`` (its
    JSON, else its text, as the SDKs' ``APIStatusError.body``) and ``message``."""

    def __init__(self, response: Any) -> None:
        self.response = response
        self.status_code: int = response.status_code
        text = response.text.strip()
        body: Any = text
        try:
            body = json.loads(text) if text else text
        except ValueError:
            pass
        self.body = body
        self.message = f"Error code: {self.status_code}" + (f" - {body}" if text else "")
        super().__init__(self.message)


class TimeoutFailure(Exception):
    """The request timed out (after the retries)."""


class ConnectionFailure(Exception):
    """The server could not be reached (after the retries); the transport's error is ``__cause__``."""


def mode() -> str:
    value = os.environ.get("PISCES_PROVIDER_TRANSPORT", "auto").strip().lower()
    return value if value in ("sdk", "direct") else "auto"


def use_direct(sdk: str) -> bool:
    """Send this request directly: the setting does not ask for the SDK, and the SDK's package version, and
    for Anthropic its API version, can be read without importing it. Whether the SDK happens to be imported
    (by an extension, a test, an earlier version's warm-up) does not matter: one process sends one way."""
    if mode() == "sdk":
        return False
    if package_version(sdk) is None:
        return False
    return sdk != "anthropic" or anthropic_api_version() is not None


# ---------------------------------------------------------------------------------------------
# What the SDK would send
# ---------------------------------------------------------------------------------------------
def _package_file(package: str, name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(package)  # finds the package without running its __init__
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        try:
            return (Path(folder) / name).read_text(encoding="utf-8")
        except OSError:
            continue
    return None


def _constant(package: str, file: str, name: str) -> str | None:
    text = _package_file(package, file)
    found = re.search(rf'^{name}\s*=\s*"([^"]+)"', text or "", re.MULTILINE)
    return found.group(1) if found else None


@functools.cache
def package_version(package: str) -> str | None:
    """The installed SDK's ``__version__``, read from its ``_version.py`` (the package is not imported)."""
    return _constant(package, "_version.py", "__version__")


@functools.cache
def anthropic_api_version() -> str | None:
    return _constant("anthropic", "_constants.py", "ANTHROPIC_API_VERSION")


def _os_name() -> str:
    system = sys.platform
    if system.startswith("linux"):
        return "Linux"
    return {"darwin": "MacOS", "win32": "Windows", "cygwin": "Windows"}.get(system) or \
        ("FreeBSD" if system.startswith("freebsd") else "OpenBSD" if system.startswith("openbsd")
         else f"Other:{system}")


def _arch() -> str:
    machine = os.uname().machine.lower() if hasattr(os, "uname") else ""
    if machine in ("arm64", "aarch64"):
        return "arm64"
    if machine == "arm":
        return "arm"
    if machine in ("x86_64", "amd64"):
        return "x64"
    if sys.maxsize <= 2**32:
        return "x32"
    return f"other:{machine}" if machine else "unknown"


@functools.cache
def platform_headers(package: str) -> dict[str, str]:
    version = package_version(package) or "unknown"
    impl = sys.implementation.name
    runtime = {"cpython": "CPython", "pypy": "PyPy"}.get(impl, impl)
    info = sys.version_info
    return {"X-Stainless-Lang": "python", "X-Stainless-Package-Version": version, "X-Stainless-OS": _os_name(),
            "X-Stainless-Arch": _arch(), "X-Stainless-Runtime": runtime,
            "X-Stainless-Runtime-Version": f"{info.major}.{info.minor}.{info.micro}"}


def openai_headers(api_key: str, extra: dict[str, str]) -> dict[str, str]:
    """``AsyncOpenAI``'s headers for a request with ``extra`` (the per-request headers, which win)."""
    headers = {"Accept": "application/json", "Content-Type": "application/json",
               "User-Agent": f"AsyncOpenAI/Python {package_version('openai')}", **platform_headers("openai"),
               "Authorization": f"Bearer {api_key}", "X-Stainless-Async": "async:asyncio"}
    org, project = os.environ.get("OPENAI_ORG_ID"), os.environ.get("OPENAI_PROJECT_ID")
    if org is not None:
        headers["OpenAI-Organization"] = org
    if project is not None:
        headers["OpenAI-Project"] = project
    return _merge(headers, extra)


def anthropic_headers(api_key: str, default_headers: dict[str, str]) -> dict[str, str]:
    """``AsyncAnthropic(api_key=..., default_headers=...)``'s headers for a streamed ``messages.create``."""
    headers = {"x-stainless-timeout": "NOT_GIVEN", "Accept": "application/json",
               "Content-Type": "application/json",
               "User-Agent": f"AsyncAnthropic/Python {package_version('anthropic')}",
               **platform_headers("anthropic"), "Authorization": f"Bearer {api_key}"}
    headers = _merge(headers, default_headers)
    headers = _merge(headers, {"X-Stainless-Async": "async:asyncio",
                               "anthropic-version": anthropic_api_version() or ""})
    return _merge(headers, default_headers)


def _merge(base: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """``base`` updated by ``extra``, header names compared without case."""
    lowered = {k.lower(): k for k in base}
    out = dict(base)
    for key, value in extra.items():
        old = lowered.get(key.lower())
        if old is not None:
            del out[old]
        out[key] = value
        lowered[key.lower()] = key
    return out


# ---------------------------------------------------------------------------------------------
# Sending, with the SDK's retries
# ---------------------------------------------------------------------------------------------
_prebuilt: list[Any] = []  # a client built by ``prepare`` on a thread, not yet taken by an event loop
_prebuilt_lock = threading.Lock()
_preparing: list[threading.Event] = []  # set when ``prepare`` is over (built, or failed)
PREPARE_WAIT_S = 5.0  # the longest a first request waits for ``prepare`` before building a client itself


def _new_client() -> Any:
    import httpx2  # noqa: PLC0415 - the HTTP client, loaded with the first direct request

    from pisces.ai.providers import http11  # noqa: PLC0415 - its transport, loaded with httpx2

    limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
    transport = http11.client_transport(limits=limits)  # None: httpx2's own (a proxy, or the setting)
    return httpx2.AsyncClient(timeout=httpx2.Timeout(DEFAULT_TIMEOUT_S, connect=DEFAULT_CONNECT_TIMEOUT_S),
                              limits=limits, follow_redirects=True, transport=transport, **http_client_options())


def prepare(tls: bool = True) -> None:
    """For a thread at start-up: import httpx2 and build the client the first direct request will use, then
    its TLS context (the trust store is most of a client's cost; OpenSSL loads it without holding the
    interpreter, and a request waiting for the client does not wait for it; ``tls=False`` for a server on plain
    http, which never needs it: built anyway it would only take the interpreter from the next command). An
    unused client belongs to no event loop yet; the first loop that sends takes it."""
    done = threading.Event()
    with _prebuilt_lock:
        _preparing.append(done)
    client = None
    try:
        client = _new_client()
        with _prebuilt_lock:
            if not _prebuilt:
                _prebuilt.append(client)
    finally:
        done.set()
    # The first request can go now (to a server on plain http it needs nothing more); an https one finds the
    # trust store loaded here, or waits for this thread's load of it.
    warm_tls = getattr(getattr(client, "_transport", None), "warm_tls", None)
    if tls and warm_tls is not None:
        warm_tls()


async def _await_prepare() -> None:
    """A request that comes while ``prepare`` is still building the client (a prompt sent right after
    start-up) waits for that client instead of building a second one beside it: the import is the thread's
    either way, and a second trust store load would only take the processor from it. The loop keeps serving
    meanwhile (polled, no thread); bounded by ``PREPARE_WAIT_S``, then the request builds its own."""
    with _prebuilt_lock:
        pending = [e for e in _preparing if not e.is_set()]
    if not pending:
        return
    deadline = time.monotonic() + PREPARE_WAIT_S
    while not pending[-1].is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.002)


def _client() -> Any:
    def make() -> Any:
        with _prebuilt_lock:
            if _prebuilt:
                return _prebuilt.pop()
        return _new_client()

    return cached_client(("direct-httpx2",), make)


async def shared_client() -> Any:
    """The httpx2 client every direct request sends through (waiting for ``prepare``'s, as ``post_stream``
    does), for a provider with its own retry loop (``google_direct``)."""
    await _await_prepare()
    return _client()


def retry_after(headers: Any) -> float | None:
    """Seconds the server asks to wait (``retry-after-ms``, then ``retry-after`` as seconds or a date)."""
    for name, divisor in (("retry-after-ms", 1000), ("retry-after", 1)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            delay = float(value)
        except ValueError:
            continue
        if delay == math.inf and value.strip().lower() not in ("inf", "+inf", "infinity", "+infinity"):
            return MAX_RETRY_AFTER_DELAY + 1
        return delay / divisor
    try:
        parsed = email.utils.parsedate_tz(headers.get("retry-after"))
        if parsed is None:
            return None
        return float(email.utils.mktime_tz(parsed) - time.time())
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def should_retry(response: Any) -> bool:
    after = retry_after(response.headers)
    if after is not None and math.isfinite(after) and after > MAX_RETRY_AFTER_DELAY:
        return False
    flag = response.headers.get("x-should-retry")
    if flag in ("true", "false"):
        return flag == "true"
    return response.status_code in (408, 409, 429) or response.status_code >= 500


def retry_delay(retries_taken: int, headers: Any = None) -> float:
    after = retry_after(headers) if headers is not None else None
    if after is not None and math.isfinite(after) and 0 < after <= MAX_RETRY_AFTER_DELAY:
        return after
    sleep = min(INITIAL_RETRY_DELAY * pow(2.0, min(retries_taken, 1000)), MAX_RETRY_DELAY)
    return max(0.0, sleep * (1 - 0.25 * random.random()))


class _Pieces:
    """A request body in pieces, sent one after the other as often as asked (a retry sends it again)."""

    __slots__ = ("parts", "size")

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts
        self.size = sum(map(len, parts))

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            yield part


async def post_stream(url: str, headers: dict[str, str], body: Any, *, max_retries: int | None,
                      timeout: float | None) -> Any:
    """POST ``body`` (JSON) and return the streamed response once its status is a success; retries as the
    SDK; raises StatusError, TimeoutFailure or ConnectionFailure."""
    import httpx2  # noqa: PLC0415 - the HTTP client, loaded with the first direct request

    await _await_prepare()
    client = _client()
    # a JsonBody (a long session's messages, their JSON text kept between requests) joins what it has: a
    # large body in a few pieces, sent one after the other (``_Pieces``) instead of joined once more
    parts = (body.to_parts() if isinstance(body, JsonBody) else
             [json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=True).encode("utf-8")])
    content: bytes | _Pieces = parts[0] if len(parts) == 1 else _Pieces(parts)
    retries = 2 if max_retries is None else max(0, max_retries)
    read: float | int = timeout if timeout is not None else int(DEFAULT_TIMEOUT_S)
    request_timeout = httpx2.Timeout(timeout, connect=DEFAULT_CONNECT_TIMEOUT_S) if timeout is not None else None
    lowered = {k.lower() for k in headers}
    taken = 0
    while True:
        sent = dict(headers)
        if "x-stainless-retry-count" not in lowered:
            sent["x-stainless-retry-count"] = str(taken)
        if "x-stainless-read-timeout" not in lowered:
            sent["x-stainless-read-timeout"] = str(read)
        kwargs: dict[str, Any] = {"headers": sent, "content": content}
        if request_timeout is not None:
            kwargs["timeout"] = request_timeout
        request = client.build_request("POST", url, **kwargs)
        if isinstance(content, _Pieces):  # framed by its length, as a body in one piece is: not chunked
            request.headers.pop("Transfer-Encoding", None)
            request.headers["Content-Length"] = str(content.size)
        try:
            response = await client.send(request, stream=True)
        except httpx2.TimeoutException as exc:
            if taken < retries:
                await asyncio.sleep(retry_delay(taken))
                taken += 1
                continue
            raise TimeoutFailure("Request timed out.") from exc
        except httpx2.TransportError as exc:
            if taken < retries:
                await asyncio.sleep(retry_delay(taken))
                taken += 1
                continue
            raise ConnectionFailure("Connection error.") from exc
        if response.status_code < 400:
            return response
        if taken < retries and should_retry(response):
            await response.aclose()
            await asyncio.sleep(retry_delay(taken, response.headers))
            taken += 1
            continue
        try:
            await response.aread()
        finally:
            await response.aclose()
        raise StatusError(response)
