"""Credentials that are not a key: the AWS chain for Amazon Bedrock, application default credentials for
Google Vertex. pi 0.73.1's rules (``getEnvApiKey``): a provider counts as having credentials when

- ``amazon-bedrock``: ``AWS_PROFILE``, or ``AWS_ACCESS_KEY_ID`` with ``AWS_SECRET_ACCESS_KEY``, or
  ``AWS_BEARER_TOKEN_BEDROCK``, ``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI``/``_FULL_URI`` or
  ``AWS_WEB_IDENTITY_TOKEN_FILE`` is set (plus pisces' ``AWS_BEDROCK_SKIP_AUTH=1``, pi's proxy switch);
- ``google-vertex``: an application default credentials file exists (``GOOGLE_APPLICATION_CREDENTIALS``, else
  ``~/.config/gcloud/application_default_credentials.json``) and ``GOOGLE_CLOUD_PROJECT`` (or
  ``GCLOUD_PROJECT``) and ``GOOGLE_CLOUD_LOCATION`` are set.

Only the environment and one ``stat`` are looked at: nothing is imported, no network is used.
"""

from __future__ import annotations

import os

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
