"""API keys: where they come from, and what to tell the user when there is none.

Lookup order for a provider:
  1. an explicit override (``--api-key``, bound to the selected model's provider);
  2. the provider's environment variables (``PROVIDER_ENV_KEYS``; an empty variable counts as unset);
  3. ``<agentDir>/auth.json`` in pi's format, ``{"<provider>": {"type": "api_key", "key": "..."}}``, or a
     subscription login's ``{"type": "oauth", "access": ..., "refresh": ..., "expires": ...}`` (refreshed before
     it expires, see ``pisces.core.config.oauth``);
  4. the provider's ``apiKey`` in models.json.
  5. credentials that are not a key (``ambient_source`` below): the AWS chain for Bedrock, Google's
     application default credentials for Vertex (the key is then pi's marker ``<authenticated>``).
Values from auth.json and models.json go through ``resolve_config_value`` (``!command``, an environment
variable's name, or the literal). pi itself reads auth.json before the environment; pisces lets the
environment win, as DESIGN.md §4 says. The faux provider needs no key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from pisces.ai.models import LOGIN_PROVIDERS, PROVIDER_ENV_KEYS, resolve_config_value
from pisces.core.config import paths
from pisces.core.safe_open import CONFIG_MAX_BYTES, read_text

# ---------------------------------------------------------------------------------------------
# Credentials that are not a key (pi's rules, ``getEnvApiKey``): a provider counts as having credentials when
# - ``amazon-bedrock``: ``AWS_PROFILE``, or ``AWS_ACCESS_KEY_ID`` with ``AWS_SECRET_ACCESS_KEY``, or
#   ``AWS_BEARER_TOKEN_BEDROCK``, ``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI``/``_FULL_URI`` or
#   ``AWS_WEB_IDENTITY_TOKEN_FILE`` is set (plus ``AWS_BEDROCK_SKIP_AUTH=1``, pi's switch for a proxy);
# - ``google-vertex``: an application default credentials file exists (``GOOGLE_APPLICATION_CREDENTIALS``, else
#   ``~/.config/gcloud/application_default_credentials.json``) and ``GOOGLE_CLOUD_PROJECT`` (or
#   ``GCLOUD_PROJECT``) and ``GOOGLE_CLOUD_LOCATION`` are set.
# Only the environment and one ``stat`` are looked at: nothing is imported, no network is used.
# ---------------------------------------------------------------------------------------------
AMBIENT_MARKER = "<authenticated>"  # pi's placeholder key: the SDK finds the real credentials itself

_AWS_SINGLE = ("AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
               "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE")


def ambient_source(provider: str) -> str | None:
    """Where the provider's credentials come from (``env:AWS_PROFILE``, ``adc:<path>``), or None."""
    env = os.environ
    if provider == "amazon-bedrock":
        if env.get("AWS_BEDROCK_SKIP_AUTH") == "1":
            return "env:AWS_BEDROCK_SKIP_AUTH"
        if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
            return "env:AWS_ACCESS_KEY_ID"
        for name in _AWS_SINGLE:
            if env.get(name):
                return f"env:{name}"
        return None
    if provider == "google-vertex":
        if not ((env.get("GOOGLE_CLOUD_PROJECT") or env.get("GCLOUD_PROJECT")) and env.get("GOOGLE_CLOUD_LOCATION")):
            return None
        path = env.get("GOOGLE_APPLICATION_CREDENTIALS") or os.path.join(
            os.path.expanduser("~"), ".config", "gcloud", "application_default_credentials.json")
        return f"adc:{path}" if os.path.isfile(path) else None
    return None


FAUX_PROVIDER = "faux"
FAUX_API_KEY = "faux"  # placeholder handed to the faux provider, which ignores it


def resolve_value(value: Any) -> str | None:
    """``resolve_config_value`` that never raises and maps empty results to None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        resolved = resolve_config_value(value)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return resolved or None


def env_api_key(provider: str) -> str | None:
    for name in PROVIDER_ENV_KEYS.get(provider, ()):
        value = os.environ.get(name)
        if value:
            return value
    return None


def load_auth_json(path: str) -> tuple[dict[str, Any], str | None]:
    """The credentials in ``path`` and an error text (None when fine; a missing file is fine)."""
    try:
        text = read_text(path, CONFIG_MAX_BYTES)  # a FIFO or a device is refused, never read
    except FileNotFoundError:
        return {}, None
    except (OSError, UnicodeDecodeError) as exc:
        return {}, f"could not read {path}: {exc}"
    if not text.strip():
        return {}, None
    try:
        data = json.loads(text)
    except ValueError as exc:
        return {}, f"ignoring {path}, it is not valid JSON ({exc})"
    if not isinstance(data, dict):
        return {}, f"ignoring {path}, the top level must be an object"
    return data, None


class AuthStorage:
    """API keys for providers, from the four sources above."""

    def __init__(self, agent_dir: str | None = None, *, models_json_keys: dict[str, str] | None = None,
                 overrides: dict[str, str] | None = None) -> None:
        self.agent_dir = agent_dir if agent_dir is not None else paths.agent_dir()
        self.auth_path = os.path.join(self.agent_dir, "auth.json")
        self.models_json_keys: dict[str, str] = dict(models_json_keys or {})
        self.overrides: dict[str, str] = dict(overrides or {})
        self.load_error: str | None = None
        self._data: dict[str, Any] = {}
        self.reload()

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.auth_path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def reload(self) -> None:
        self._loaded_stamp = self._stamp()
        self._data, self.load_error = load_auth_json(self.auth_path)
        if self.load_error:
            print(f"Warning: {self.load_error}", file=sys.stderr, flush=True)

    def set_override(self, provider: str, key: str) -> None:
        """Use ``key`` for ``provider`` ahead of every other source (``--api-key``)."""
        self.overrides[provider] = key

    def _auth_json_key(self, provider: str, refresh: bool = True) -> str | None:
        cred = self._data.get(provider)
        if isinstance(cred, dict) and cred.get("type") == "api_key":
            return resolve_value(cred.get("key"))
        if isinstance(cred, dict) and cred.get("type") == "oauth":  # a subscription login (pisces login)
            if not refresh:  # asking whether there is one: no network
                access = cred.get("access")
                return access if isinstance(access, str) and access else None
            from pisces.core.config.oauth import access_token  # noqa: PLC0415 - only for a stored login

            token = access_token(self.auth_path, provider, cred)
            if token is not None and token != cred.get("access"):
                self.reload()  # refreshed and saved: keep the new entry
            return token
        return None

    def oauth_entry(self, provider: str) -> dict[str, Any] | None:
        cred = self._data.get(provider)
        return cred if isinstance(cred, dict) and cred.get("type") == "oauth" else None

    def get_api_key(self, provider: str) -> str | None:
        """The key to use for ``provider``, or None when none is configured."""
        return self.lookup(provider)[0]

    def key_source(self, provider: str) -> str | None:
        """Where the key would come from: "override", "env:<NAME>", "auth.json", "models.json", "none
        needed" (faux), or None."""
        return self.lookup(provider, refresh=False)[1]

    def lookup(self, provider: str, *, refresh: bool = True) -> tuple[str | None, str | None]:
        """(key, where it came from). ``refresh=False`` hands out a stored login's token as it is, without
        refreshing it (for questions such as ``has_auth``: no network). auth.json is read again when it
        changed since it was read (a ``pisces login`` or ``/login`` in another process: one ``stat``)."""
        if self._stamp() != self._loaded_stamp:
            self.reload()
        if provider == FAUX_PROVIDER:
            return FAUX_API_KEY, "none needed"
        key = self.overrides.get(provider)
        if key:
            return key, "override"
        for name in PROVIDER_ENV_KEYS.get(provider, ()):
            value = os.environ.get(name)
            if value:
                return value, f"env:{name}"
        key = self._auth_json_key(provider, refresh)
        if key:
            return key, "auth.json"
        key = resolve_value(self.models_json_keys.get(provider))
        if key:
            return key, "models.json"
        ambient = ambient_source(provider)  # the AWS chain, Google's application default credentials
        if ambient:
            return AMBIENT_MARKER, ambient
        return None, None

    def has_auth(self, provider: str) -> bool:
        return self.lookup(provider, refresh=False)[0] is not None


# ---------------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------------
def missing_key_message(provider: str, agent_dir: str | None = None) -> str:
    """A sentence that says which key is missing and where to put it."""
    auth_path = paths.display_path(os.path.join(agent_dir if agent_dir is not None else paths.agent_dir(),
                                                "auth.json"))
    names = PROVIDER_ENV_KEYS.get(provider, ())
    login = f", or run `pisces login {provider}`" if provider in LOGIN_PROVIDERS else ""
    if names:
        env = names[0] if len(names) == 1 else f"{names[0]} (or {', '.join(names[1:])})"
        return f"No API key for provider {provider}: set {env} or add it to {auth_path}{login}"
    if login:
        return f"No credentials for provider {provider}: run `pisces login {provider}`"
    models_path = os.path.join(os.path.dirname(auth_path), "models.json")
    return (f"No API key for provider {provider}: add it to {auth_path} "
            f"or give the provider an apiKey in {models_path}")


def no_api_key_error(model: Any, registry: Any, docs: str | None = None) -> str:
    """Why a prompt or compaction cannot run: pi's first sentence (clients match on it), then what is
    missing and how to fix it: the provider and its variable, or that no model is selected at all; and a
    models.json that could not be read. Names no command pisces lacks (pi says ``Use /login``)."""
    d = docs if docs is not None else paths.docs_dir()
    agent_dir = getattr(registry, "agent_dir", None) or paths.agent_dir()
    auth = paths.display_path(os.path.join(agent_dir, "auth.json"))
    provider = getattr(model, "provider", "unknown")
    if provider in ("unknown", "", None):
        head = "No API key found for the selected model (no model is selected: no provider has a key)."
        keys = ", ".join(names[0] for names in PROVIDER_ENV_KEYS.values())
        fix = (f"Set the key of the provider you use ({keys}), or add it to {auth}, then pick a model with "
               "--provider/--model. `pisces --list-models` shows which keys are set.")
    else:
        head = f"No API key found for the selected model ({provider}/{model.id})."
        names = PROVIDER_ENV_KEYS.get(provider, ())
        login = f" or log in with `pisces login {provider}`" if provider in LOGIN_PROVIDERS else ""
        if names:
            env = names[0] if len(names) == 1 else f"{names[0]} (or {', '.join(names[1:])})"
            fix = f"Set {env}, add the key for {provider} to {auth}{',' if login else ''}{login}."
        elif login:
            fix = f"Log in with `pisces login {provider}` (a subscription login; there is no key variable)."
        else:
            models_json = os.path.join(os.path.dirname(auth), "models.json")
            fix = f"Add the key for {provider} to {auth}, or give the provider an apiKey in {models_json}."
    text = f"{head}\n\n{fix} See:\n  {d}/providers.md\n  {d}/models.md"
    load_error = getattr(registry, "load_error", None)
    if load_error:
        text += f"\n\nAlso: {load_error}"
    return text


def no_api_key_rpc_error(docs: str | None = None) -> str:
    """pi's exact error for ``prompt``/``compact`` when the selected model has no key; ``docs`` is the
    documentation directory shown in it (pisces' own by default)."""
    d = docs if docs is not None else paths.docs_dir()
    return ("No API key found for the selected model.\n\n"
            "Use /login to log into a provider via OAuth or API key. See:\n"
            f"  {d}/providers.md\n"
            f"  {d}/models.md")
