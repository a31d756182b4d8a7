"""Gemini (``google-generative-ai``) requests through httpx2 alone: the request google-genai would send, without
importing it (0.5-0.8 s and its pydantic models: about 240 µs an event against 10-20 µs read here).

What this module guarantees, against the installed google-genai (``tests/ai/test_google_direct.py`` compares
both ways on a scripted server):

- the same request: ``POST {base}/models/{model}:streamGenerateContent?alt=sse`` (the SDK's URL joining,
  ``GOOGLE_GENAI_API_VERSION`` without a base URL), the same headers (``x-goog-api-key``, ``Content-Type``,
  ``user-agent`` and ``x-goog-api-client`` with the SDK's version read from its ``version.py`` without importing
  it, ``X-Server-Timeout``, the caller's headers merged as the SDK merges them), the same JSON body, byte for
  byte (:func:`rest_body` converts pisces' SDK-form payload: camelCase where the SDK's converters rename,
  snake_case inside what it dumps whole, bytes as URL-safe base64, ``json.dumps`` defaults);
- the retries pisces configures on the SDK (``HttpRetryOptions(attempts=maxRetries + 1)``): a time-out, a
  connection failure, or status 408/429/500/502/503/504, after 1, 2, 4 … s (at most 60 s) plus up to 1 s of
  jitter; no time-out unless ``timeoutMs`` is set (then for each phase), no redirects;
- the SDK's reading of the SSE body (``data:`` lines joined until a blank line; other lines gathered until
  their braces balance, which is how an error arrives as plain JSON) and its errors: :class:`APIError` with
  the SDK's ``code``/``status``/``message``/``details``, for an error status (the body parsed, else its
  text and reason) and for an ``{"error": …}`` chunk in the stream; a chunk that is not JSON raises
  :class:`UnknownApiResponseError` with the SDK's sentence.

Not reproduced, so sent through the SDK instead: a payload holding anything :func:`rest_body` does not know
(a ``before_provider_request`` hook may add fields), ``GOOGLE_GENAI_USE_VERTEXAI``/``_ENTERPRISE`` (the SDK
would then talk to Vertex), and an SDK whose version cannot be read. A reply the server asks to be resumed
(``continuationToken``) is followed as the SDK's automatic continuation follows it (:func:`reply`).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import math
import os
import random
import re
import sys
from typing import Any, AsyncGenerator
from urllib.parse import urlparse, urlunparse

import msgspec

from pisces.ai.providers import direct
from pisces.ai.providers._limits import line_batches

RETRY_STATUS = (408, 429, 500, 502, 503, 504)
INITIAL_DELAY, MAX_DELAY, EXP_BASE, JITTER = 1.0, 60.0, 2.0, 1.0
DEFAULT_BASE = "https://generativelanguage.googleapis.com/"


class APIError(Exception):
    """As google-genai's ``errors.APIError``: ``code``, ``status``, ``message``, ``details``, ``response``."""

    def __init__(self, code: int | None, response_json: Any, response: Any = None) -> None:
        if isinstance(response_json, list) and len(response_json) == 1:
            response_json = response_json[0]
        self.response = response
        self.details = response_json
        self.message = _field(response_json, "message")
        self.status = _field(response_json, "status")
        self.code = code if code else _field(response_json, "code")
        super().__init__(f"{self.code} {self.status}. {self.details}")


class UnknownApiResponseError(ValueError):
    """A chunk of the stream that is not JSON (the SDK's class name and sentence)."""


class Unsupported(Exception):
    """The payload holds something :func:`rest_body` does not convert: send it through the SDK."""


def _field(body: Any, key: str) -> Any:
    try:
        return body.get(key, body.get("error", {}).get(key, None))
    except AttributeError:
        return None


# ---------------------------------------------------------------------------------------------
# When
# ---------------------------------------------------------------------------------------------
@functools.cache
def sdk_version() -> str | None:
    """google-genai's ``__version__``, read from its ``version.py`` (the package is not imported)."""
    text = direct._package_file("google.genai", "version.py")
    found = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", text or "", re.MULTILINE)
    return found.group(1) if found else None


def _env_true(name: str) -> bool | None:
    value = os.environ.get(name)
    return None if value is None else value.lower() in ("true", "1")


def use_direct() -> bool:
    """Send Gemini requests here: the setting does not ask for the SDK, its version can be read, and the
    environment does not turn an API-key client into a Vertex one."""
    if direct.mode() == "sdk" or sdk_version() is None:
        return False
    enterprise = _env_true("GOOGLE_GENAI_USE_ENTERPRISE")
    vertex = enterprise if enterprise is not None else _env_true("GOOGLE_GENAI_USE_VERTEXAI")
    return not vertex


# ---------------------------------------------------------------------------------------------
# The request
# ---------------------------------------------------------------------------------------------
def _join(base_url: str, path: str) -> str:
    parsed = urlparse(base_url)
    base_path = parsed.path[:-1] if parsed.path.endswith("/") else parsed.path
    path = path[1:] if path.startswith("/") else path
    return urlunparse(parsed._replace(path=base_path + "/" + path))


def url(base_url: str | None, model: str) -> str:
    """The stream's URL as ``genai.Client(api_key=…, http_options={base_url, api_version: ""})`` builds it
    (the SDK's default endpoint and version without a base URL)."""
    if not model:
        raise ValueError("model is required.")
    if ".." in model or "?" in model or "&" in model:
        raise ValueError("invalid model parameter.")
    name = model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"
    path = f"{name}:streamGenerateContent?alt=sse"
    if base_url:
        return _join(base_url, f"/{path}")
    env = os.environ.get("GOOGLE_GENAI_API_VERSION")
    version = "v1beta" if env == "beta" else (env or "v1")
    return _join(DEFAULT_BASE, f"{version}/{path}")


def _append_versions(headers: dict[str, str]) -> None:
    """google-genai's ``append_library_version_headers``."""
    for name in ("user-agent", "x-goog-api-client"):
        variants = [k for k in headers if k.lower() == name]
        if variants:
            headers[name] = " ".join(dict.fromkeys(headers.pop(k) for k in variants))
    library = f"google-genai-sdk/{sdk_version()}"
    language = "gl-python/" + sys.version.split()[0]
    both = f"{library} {language}"
    for name in ("user-agent", "x-goog-api-client"):
        value = headers.get(name)
        if value is None:
            headers[name] = both
        elif library not in value:
            headers[name] = f"{both} {value}"
        elif language not in value:
            headers[name] = f"{value} {language}"


def headers(api_key: str, extra: dict[str, str], timeout_s: float | None) -> dict[str, str]:
    """The headers of the SDK's client built with ``api_key`` and ``http_options.headers=extra``."""
    out = {"Content-Type": "application/json", "x-goog-api-key": api_key.strip(), **extra}
    _append_versions(out)
    if timeout_s and "X-Server-Timeout" not in out:
        out["X-Server-Timeout"] = str(math.ceil(timeout_s))
    return out


def _b64(value: Any) -> str:
    if not isinstance(value, (bytes, bytearray)):
        raise Unsupported("bytes expected")
    return base64.urlsafe_b64encode(value).decode("ascii")


def _plain(value: Any) -> Any:
    """A free-form JSON value (arguments, a response, a schema), bytes encoded as the SDK encodes them."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(v, (bytes, bytearray)) for v in value):
            return [_b64(v) for v in value]
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return _b64(value)
    return value


def _only(obj: Any, allowed: frozenset[str]) -> dict[str, Any]:
    if not isinstance(obj, dict) or not set(obj) <= allowed:
        raise Unsupported(f"unexpected fields: {sorted(set(obj) - allowed) if isinstance(obj, dict) else obj!r}")
    return {k: v for k, v in obj.items() if v is not None}


_BLOB = frozenset({"mime_type", "data"})
_CALL = frozenset({"id", "name", "args"})
_RESPONSE = frozenset({"id", "name", "response", "parts"})
_PART = frozenset({"text", "thought", "thought_signature", "function_call", "function_response", "inline_data"})


def _ordered(obj: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """A model dumped whole by the SDK: its fields in the model's declaration order."""
    return {k: obj[k] for k in order if k in obj}


def _blob(obj: Any, order: tuple[str, ...] = ("data", "mime_type")) -> dict[str, Any]:
    """A ``Blob`` (``data``, ``mime_type``) or, with the other order, a ``FunctionResponseBlob``."""
    blob = _only(obj, _BLOB)
    if "data" in blob:
        blob["data"] = _b64(blob["data"])
    return _ordered(blob, order)


def _part(obj: Any) -> dict[str, Any]:
    part = _only(obj, _PART)
    out: dict[str, Any] = {}
    if "function_call" in part:
        call = _only(part["function_call"], _CALL)
        out["functionCall"] = {k: _plain(call[k]) for k in ("id", "args", "name") if k in call}
    if "function_response" in part:
        response = _only(part["function_response"], _RESPONSE)
        dumped: dict[str, Any] = {}
        if "parts" in response:  # FunctionResponsePart, dumped whole: snake_case
            dumped["parts"] = [{"inline_data": _blob(_only(p, frozenset({"inline_data"}))["inline_data"],
                                                     ("mime_type", "data"))} for p in response["parts"]]
        for key in ("id", "name", "response"):
            if key in response:
                dumped[key] = _plain(response[key])
        out["functionResponse"] = dumped
    if "inline_data" in part:
        out["inlineData"] = _blob(part["inline_data"])  # a Blob, dumped whole: snake_case
    if "text" in part:
        out["text"] = part["text"]
    if "thought" in part:
        out["thought"] = part["thought"]
    if "thought_signature" in part:
        out["thoughtSignature"] = _b64(part["thought_signature"])
    return out


def _content(obj: Any) -> dict[str, Any]:
    content = _only(obj, frozenset({"role", "parts"}))
    out: dict[str, Any] = {}
    if "parts" in content:
        out["parts"] = [_part(p) for p in content["parts"]]
    if "role" in content:
        out["role"] = content["role"]
    return out


_GENERATION = {"temperature": "temperature", "top_p": "topP", "top_k": "topK", "candidate_count": "candidateCount",
               "max_output_tokens": "maxOutputTokens", "stop_sequences": "stopSequences", "seed": "seed",
               "presence_penalty": "presencePenalty", "frequency_penalty": "frequencyPenalty",
               "response_mime_type": "responseMimeType", "response_modalities": "responseModalities"}
_THINKING_ORDER = ("include_thoughts", "thinking_budget", "thinking_level")
_THINKING = frozenset(_THINKING_ORDER)
_DECLARATION_ORDER = ("description", "name", "parameters_json_schema")
_DECLARATION = frozenset(_DECLARATION_ORDER)
_CONFIG = frozenset({*_GENERATION, "thinking_config", "system_instruction", "tools", "safety_settings"})


def _config(config: Any, body: dict[str, Any]) -> dict[str, Any]:
    config = _only(config, _CONFIG)
    generation: dict[str, Any] = {}
    if isinstance(config.get("system_instruction"), str):
        body["systemInstruction"] = {"parts": [{"text": config["system_instruction"]}], "role": "user"}
    elif "system_instruction" in config:
        raise Unsupported("system_instruction other than text")
    for key, name in _GENERATION.items():
        if key in config:
            generation[name] = config[key]
    if "safety_settings" in config:
        body["safetySettings"] = [_ordered(_only(s, frozenset({"category", "threshold"})), ("category", "threshold"))
                                  for s in config["safety_settings"]]
    if "tools" in config:
        tools = []
        for tool in config["tools"]:
            declarations = _only(tool, frozenset({"function_declarations"})).get("function_declarations")
            tools.append({} if declarations is None else {"functionDeclarations": [
                {k: _plain(v) for k, v in _ordered(_only(d, _DECLARATION), _DECLARATION_ORDER).items()}
                for d in declarations]})
        body["tools"] = tools
    if "thinking_config" in config:  # a ThinkingConfig, dumped whole: snake_case
        generation["thinkingConfig"] = _ordered(_only(config["thinking_config"], _THINKING), _THINKING_ORDER)
    return generation


def rest_body(payload: Any) -> tuple[str, dict[str, Any]] | None:
    """``(model, JSON body)`` that google-genai sends for ``generate_content_stream(**payload)`` (pisces'
    dict form: ``model``, ``contents``, ``config``), or None when the payload holds something this does not
    convert (the request then goes through the SDK)."""
    try:
        payload = _only(payload, frozenset({"model", "contents", "config"}))
        model = payload.get("model")
        contents = payload.get("contents")
        if not isinstance(model, str) or not isinstance(contents, list) or not contents:
            return None
        body: dict[str, Any] = {"contents": [_content(c) for c in contents]}
        if "config" in payload:
            generation = _config(payload["config"], body)
            body["generationConfig"] = generation
        return model, body
    except (Unsupported, TypeError, AttributeError):
        return None


# ---------------------------------------------------------------------------------------------
# Sending, with the SDK's retries
# ---------------------------------------------------------------------------------------------
def retry_delay(attempt: int) -> float:
    """tenacity's ``wait_exponential_jitter`` as the SDK configures it, after the ``attempt``-th try."""
    try:
        delay = INITIAL_DELAY * EXP_BASE ** (attempt - 1) + random.uniform(0, JITTER)
    except OverflowError:
        delay = MAX_DELAY
    return max(0.0, min(delay, MAX_DELAY))


async def status_error(response: Any) -> APIError:
    """google-genai's error for a reply whose status is not 200 (body read, bounded by the client's reader)."""
    await response.aread()
    try:
        body = response.json()
    except json.JSONDecodeError:
        body = {"message": response.text, "status": response.reason_phrase}
    return APIError(response.status_code, body, response)


async def open_stream(url: str, headers: dict[str, str], body: dict[str, Any], *, attempts: int,
                      timeout_s: float | None) -> Any:
    """POST ``body`` and return the streamed response once its status is 200, retrying as the SDK does;
    raises :class:`APIError`, or httpx2's error for a time-out or a connection that failed every attempt."""
    import httpx2  # noqa: PLC0415 - the HTTP client, loaded with the first direct request

    client = await direct.shared_client()
    content = json.dumps(body).encode("utf-8")  # as the SDK: json.dumps' defaults
    transient = (httpx2.TimeoutException, httpx2.ConnectError)
    attempts = max(1, attempts)
    attempt = 1
    while True:
        request = client.build_request("POST", url, content=content, headers=headers, timeout=timeout_s)
        try:
            response = await client.send(request, stream=True, follow_redirects=False)
        except transient:
            if attempt >= attempts:
                raise
            await asyncio.sleep(retry_delay(attempt))
            attempt += 1
            continue
        if response.status_code == 200:
            return response
        try:
            error = await status_error(response)
        finally:
            await response.aclose()
        if attempt >= attempts or error.code not in RETRY_STATUS:
            raise error
        await asyncio.sleep(retry_delay(attempt))
        attempt += 1


# ---------------------------------------------------------------------------------------------
# Automatic continuation (google-genai's StreamContinuation)
# ---------------------------------------------------------------------------------------------
MAX_RECONNECTS_WITHOUT_PROGRESS = 3


def _token_bytes(token: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(token) if ("-" in token or "_" in token) else base64.b64decode(token)
    except (ValueError, TypeError):
        return token.encode("utf-8")


def _with_token(body: dict[str, Any], token: bytes | None) -> dict[str, Any]:
    """The body of a hop resuming from ``token``: ``continuationToken`` where the SDK's converter puts it."""
    if token is None:
        return body
    out = {k: v for k, v in body.items() if k not in ("continuationToken", "generationConfig")}
    out["continuationToken"] = _b64(token)
    if "generationConfig" in body:
        out["generationConfig"] = body["generationConfig"]
    return out


def _add_usage(before: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """This hop's running usage on top of the finished hops' (numbers summed, as the SDK merges them)."""
    merged = dict(before)
    for key, value in now.items():
        old = merged.get(key)
        numbers = isinstance(value, (int, float)) and isinstance(old, (int, float))
        merged[key] = old + value if numbers and not isinstance(value, bool) else value
    return merged


class _Hop:
    def __init__(self, start: bytes | None) -> None:
        self.start = start
        self.token: bytes | None = None
        self.finish: Any = None
        self.feedback = False
        self.content = False
        self.any = False
        self.usage: dict[str, Any] | None = None


async def reply(url: str, headers: dict[str, str], body: dict[str, Any], *, attempts: int,
                timeout_s: float | None) -> AsyncGenerator[list[Any], None]:
    """The reply's chunks (a list per read), following continuation tokens across requests as the SDK does
    by default: a hop that ends with finish reason ``CONTINUATION`` and a new token, or that breaks off after
    one, is resumed from it (the intermediate finish reason cleared, usage summed over hops); a break without
    progress is retried from the same token at most three times. Raises what the SDK raises."""
    done_usage: dict[str, Any] | None = None
    resume: bytes | None = None
    reconnects = 0
    last_error: Exception | None = None
    while True:
        hop = _Hop(resume)
        error: Exception | None = None
        try:
            response = await open_stream(url, headers, _with_token(body, resume), attempts=attempts,
                                         timeout_s=timeout_s)
            reading = chunks(response)
            try:
                async for batch in reading:
                    out: list[Any] = []
                    for chunk in batch:
                        if isinstance(chunk, Exception):
                            error = chunk
                            break
                        out.append(_observe(hop, chunk, done_usage))
                    if out:
                        yield out
                    if error is not None:
                        break
            finally:
                await reading.aclose()  # closes the response
        except Exception as exc:  # noqa: BLE001 - as the SDK: the hop's failure decides whether to resume
            error = exc
        if hop.usage is not None:
            done_usage = hop.usage
        if isinstance(error, APIError) and not hop.any:
            raise error
        progress = hop.content or bool(hop.token and hop.token != hop.start)
        if error is not None:
            last_error = error
        elif progress:
            last_error = None
        if hop.finish is not None or hop.feedback:
            resume = hop.token if (hop.finish == "CONTINUATION" and not hop.feedback and hop.token
                                   and hop.token != hop.start) else None
            reconnects = 0
        elif hop.token and hop.token != hop.start:
            resume, reconnects = hop.token, 0
        elif hop.content or reconnects >= MAX_RECONNECTS_WITHOUT_PROGRESS:
            resume = None
        else:
            resume, reconnects = hop.start, reconnects + 1
        if resume and not hop.feedback and hop.finish in (None, "CONTINUATION"):
            continue
        if error is not None:
            raise error
        if hop.finish is None and not hop.feedback and last_error is not None:
            raise last_error
        return


def _observe(hop: _Hop, chunk: Any, done_usage: dict[str, Any] | None) -> Any:
    """``StreamContinuation.observe``: record the chunk, clear an intermediate finish reason, sum usage."""
    hop.any = True
    if not isinstance(chunk, dict):
        return chunk
    if chunk.get("promptFeedback") is not None:
        hop.feedback = True
    candidates = chunk.get("candidates")
    cand = candidates[0] if isinstance(candidates, list) and candidates else None
    if isinstance(cand, dict):
        content = cand.get("content")
        if isinstance(content, dict) and content.get("parts"):
            hop.content = True
        finish = cand.get("finishReason")
        if finish:
            hop.finish = finish
        token = cand.get("continuationToken")
        if isinstance(token, str) and token:
            hop.token = _token_bytes(token)
        elif finish and finish != "CONTINUATION":
            hop.token = None
        if finish == "CONTINUATION" and hop.token:
            cand = {k: v for k, v in cand.items() if k != "finishReason"}
            chunk = {**chunk, "candidates": [cand, *(candidates[1:] if isinstance(candidates, list) else ())]}
    usage = chunk.get("usageMetadata")
    if isinstance(usage, dict):
        if done_usage is not None:
            usage = _add_usage(done_usage, usage)
            chunk = {**chunk, "usageMetadata": usage}
        hop.usage = usage
    return chunk


# ---------------------------------------------------------------------------------------------
# The reply
# ---------------------------------------------------------------------------------------------
class _BraceBuffer:
    """Lines that are not ``data:`` lines, gathered until their braces balance outside strings (the SDK's)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0
        self.in_string = False
        self.escaped = False

    def add(self, line: str) -> str | None:
        for c in line:
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif c == "\\":
                    self.escaped = True
                elif c == '"':
                    self.in_string = False
            elif c == '"':
                self.in_string = True
            elif c == "{":
                self.depth += 1
            elif c == "}":
                self.depth -= 1
        self.lines.append(line)
        return self.flush() if self.depth == 0 else None

    def flush(self) -> str:
        text = "".join(self.lines)
        self.lines = []
        self.depth = 0
        self.in_string = self.escaped = False
        return text


_decode = msgspec.json.decode


def _load(raw: bytes | str, response: Any) -> Any:
    """One chunk: its JSON, or the exception the SDK raises for it (returned, so that the chunks before it
    in the same read still count)."""
    try:
        value = _decode(raw)
    except msgspec.DecodeError:
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        try:
            value = json.loads(text)  # NaN and Infinity, which the SDK's json.loads reads as floats
        except ValueError:
            return UnknownApiResponseError(f"Failed to parse response as JSON. Raw response: {text}")
    if isinstance(value, dict) and value and next(iter(value)) == "error":
        error = value.get("error")
        return APIError(error.get("code") if isinstance(error, dict) else None, value, response)
    return value


async def chunks(response: Any) -> AsyncGenerator[list[Any], None]:
    """The reply's chunks as the SDK reads them, a list per network read: each a JSON value, or an exception
    to raise at that point."""
    data: list[bytes] = []
    braces = _BraceBuffer()
    try:
        async for lines in line_batches(response, keep_tail=True):
            out: list[Any] = []
            for line in lines:
                if line.endswith(b"\r"):
                    line = line[:-1]
                if not line:
                    if data:
                        out.append(_load(data[0] if len(data) == 1 else b"\n".join(data), response))
                        data = []
                elif line.startswith(b"data: "):
                    data.append(line[6:])
                else:
                    text = braces.add(line.decode("utf-8", "replace"))
                    if text is not None:
                        out.append(_load(text, response))
            if out:
                yield out
        rest: list[Any] = []
        remaining = braces.flush()
        if remaining:
            rest.append(_load(remaining, response))
        if data:
            rest.append(_load(b"\n".join(data), response))
        if rest:
            yield rest
    finally:
        await response.aclose()
