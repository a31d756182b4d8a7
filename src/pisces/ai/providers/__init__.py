"""Provider registry: maps a Model's ``api`` to the module that streams it.

Provider modules (and so the vendors' SDKs) are imported only when first used.
A provider module exposes ``async def stream(model, context, options)``: an async
generator of AssistantMessageEvent that ends with exactly one ``done`` or ``error``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

_MODULES: dict[str, str] = {
    "anthropic-messages": "pisces.ai.providers.anthropic",
    "openai-completions": "pisces.ai.providers.openai_completions",
    "openai-responses": "pisces.ai.providers.openai_responses",
    "google-generative-ai": "pisces.ai.providers.google",
    "faux": "pisces.ai.providers.faux",
}
_loaded: dict[str, ModuleType] = {}


def known_apis() -> list[str]:
    return list(_MODULES)


def register_provider(api: str, module: str) -> None:
    """Register (or replace) the module that serves ``api``."""
    _MODULES[api] = module
    _loaded.pop(api, None)


def get_provider(api: str) -> ModuleType:
    mod = _loaded.get(api)
    if mod is None:
        path = _MODULES.get(api)
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
}


def warm(api: str) -> None:
    """Import the provider module and its SDK (a second or so for some SDKs), e.g. on an idle thread, so
    the first request does not pay for it. Failures are left for the request to report."""
    try:
        get_provider(api)
        sdk = SDK_MODULES.get(api)
        if sdk:
            importlib.import_module(sdk)
    except Exception:  # noqa: BLE001 - the real request reports the problem with context
        pass
