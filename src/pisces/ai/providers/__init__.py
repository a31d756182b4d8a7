"""Provider registry: maps a Model's ``api`` to the module that streams it.

Provider modules (and so the vendors' SDKs) are imported only when first used.
A provider module exposes ``async def stream(model, context, options)``: an async
generator of AssistantMessageEvent that ends with exactly one ``done`` or ``error``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from pisces.ai.gc_pause import gc_paused

_MODULES: dict[str, str] = {
    "anthropic-messages": "pisces.ai.providers.anthropic",
    "openai-completions": "pisces.ai.providers.openai_completions",
    "openai-responses": "pisces.ai.providers.openai_responses",
    "google-generative-ai": "pisces.ai.providers.google",
    "azure-openai-responses": "pisces.ai.providers.azure_openai",
    "mistral-conversations": "pisces.ai.providers.mistral",
    "bedrock-converse-stream": "pisces.ai.providers.bedrock",
    "google-vertex": "pisces.ai.providers.vertex",
    "openai-codex-responses": "pisces.ai.providers.openai_codex",
    "faux": "pisces.ai.providers.faux",
}
_loaded: dict[str, ModuleType] = {}

# APIs of pi's catalogue that pisces does not speak yet: their models are listed, and a request says so.
NOT_IMPLEMENTED: dict[str, str] = {}


def known_apis() -> list[str]:
    return list(_MODULES)


def is_served(api: str) -> bool:
    """Whether pisces has a provider module for ``api`` (nothing is imported)."""
    return api in _MODULES


def register_provider(api: str, module: str) -> None:
    """Register (or replace) the module that serves ``api``."""
    _MODULES[api] = module
    _loaded.pop(api, None)


def get_provider(api: str) -> ModuleType:
    mod = _loaded.get(api)
    if mod is None:
        path = _MODULES.get(api)
        if path is None and api in NOT_IMPLEMENTED:
            raise LookupError(f"The {NOT_IMPLEMENTED[api]} API ('{api}') is not implemented in pisces yet; "
                              "see docs/providers.md for the providers that are")
        if path is None:
            raise LookupError(f"No provider for API '{api}'. Known APIs: {', '.join(_MODULES)}")
        mod = importlib.import_module(path)
        _loaded[api] = mod
    return mod


# The SDK each API's module imports on first use; ``warm`` imports it ahead of the first request.
SDK_MODULES: dict[str, str] = {
    "anthropic-messages": "anthropic",
    "openai-completions": "openai",
    "openai-responses": "openai",
    "google-generative-ai": "google.genai",
    "azure-openai-responses": "openai",
    "mistral-conversations": "openai",
    "bedrock-converse-stream": "boto3",
    "google-vertex": "google.genai",
    "openai-codex-responses": "openai",
}


def import_sdk(name: str) -> ModuleType:
    """Import a vendor SDK module with the cyclic garbage collector paused: the SDKs build thousands of
    classes at import, and the collections they would set off cost 10-15% of the import time
    (openai 0.36 -> 0.32 s, anthropic 0.76 -> 0.67 s on the benchmark machine, medians of 4 and 3).

    Always through the import system, never a ``sys.modules`` shortcut: while the idle warm-up thread is
    importing the SDK, ``sys.modules`` already holds the half-initialised module, and only the import
    system's module lock makes a second importer wait for it to finish."""
    with gc_paused():
        return importlib.import_module(name)


def warm(api: str) -> None:
    """Import the provider module and its SDK (a second or so for some SDKs), e.g. on an idle thread, so
    the first request does not pay for it. Failures are left for the request to report."""
    try:
        get_provider(api)
        sdk = SDK_MODULES.get(api)
        if sdk:
            import_sdk(sdk)
    except Exception:  # noqa: BLE001 - the real request reports the problem with context
        pass


# APIs whose requests ``direct`` (Gemini's: ``google_direct``) sends without their SDK (Azure's and Vertex's
# clients are their own).
DIRECT_APIS = frozenset({"openai-completions", "openai-responses", "mistral-conversations", "anthropic-messages",
                         "google-generative-ai"})


def _goes_direct(api: str) -> bool:
    """``api``'s requests are sent without its SDK (``providers.direct``)."""
    if api not in DIRECT_APIS:
        return False
    try:
        if api == "google-generative-ai":
            from pisces.ai.providers import google_direct  # noqa: PLC0415 - as direct below

            return google_direct.use_direct()
        from pisces.ai.providers import direct  # noqa: PLC0415 - first request only; direct imports _shared, which imports this package

        return direct.use_direct(SDK_MODULES[api])
    except Exception:  # noqa: BLE001 - as in warm: the request reports it
        return False


def warm_for_request(api: str) -> None:
    """Before a request: the provider module, and the SDK too unless the request is sent without it
    (``direct``: the SDK is never imported then)."""
    if _goes_direct(api):
        try:
            get_provider(api)
        except Exception:  # noqa: BLE001 - as in warm: the request reports it
            pass
        return
    warm(api)


_transport_prepared: list[bool] = []  # one client serves every direct API: built once a process


def prepare_transport(api: str, base_url: str | None = None) -> None:
    """For a thread: when ``api``'s requests go without its SDK (``direct``), load what they need (httpx2 and
    a client, then its TLS context unless ``base_url`` is plain http), a fraction of the SDK's import; once a
    process. Nothing otherwise."""
    if _transport_prepared or not _goes_direct(api):
        return
    _transport_prepared.append(True)
    try:
        from pisces.ai.providers import direct  # noqa: PLC0415 - as in _goes_direct

        direct.prepare(tls=not (base_url or "").lower().startswith("http://"))
    except Exception:  # noqa: BLE001 - as in warm: the request reports it
        pass


_prepared: set[str] = set()


def prepare(api: str, base_url: str | None = None) -> None:
    """``warm``, then, once per API, let the provider module build what its first request would build
    (``prepare()``: an SDK client, whose construction loads the HTTP transport: another 40-60 ms).
    For the idle warm-up thread; ``stream`` itself only calls ``warm``. An API whose requests go without
    the SDK (``direct``) gets its module and the transport's client instead (its TLS context unless
    ``base_url`` is plain http): no SDK import."""
    if _goes_direct(api):
        warm_for_request(api)
        prepare_transport(api, base_url)
        return
    warm(api)
    if api in _prepared:
        return
    _prepared.add(api)
    try:
        hook = getattr(get_provider(api), "prepare", None)
        if hook is not None:
            hook()
    except Exception:  # noqa: BLE001 - as in warm: the request reports it
        pass
