"""``pisces login [PROVIDER]`` and ``pisces logout PROVIDER``: subscription logins stored in auth.json.

``login`` without a provider lists those offered. The flow prints where to go (and, for the browser flow,
tries to open it unless ``--no-browser``); Ctrl+C cancels. Exit status 0 on success, 1 when the flow failed
(the reason on stderr), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import os
import sys

from pisces.core.config import paths


def _parser(name: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"pisces {name}", description=__doc__.split("\n\n")[0])
    p.add_argument("provider", nargs="?" if name == "login" else None, help="github-copilot or openai-codex")
    if name == "login":
        p.add_argument("--no-browser", action="store_true", help="print the address instead of opening a browser")
    return p


def run_login(argv: list[str]) -> int:
    from pisces.core.config.oauth import LoginCallbacks, OAuthError, providers, save_credentials  # noqa: PLC0415 - this command only

    args = _parser("login").parse_args(argv)
    offered = providers()
    if not args.provider:
        for p in offered.values():
            print(f"{p.id:16} {p.name}: {p.why}")
        return 0
    prov = offered.get(args.provider)
    if prov is None:
        print(f"pisces login: no login for '{args.provider}'; offered: {', '.join(offered)} "
              "(other providers take a key: see docs/providers.md)", file=sys.stderr)
        return 2

    def on_auth(url: str, instructions: str) -> None:
        print(f"Open {url}\n{instructions}", flush=True)
        if not args.no_browser and args.provider == "openai-codex":
            import webbrowser  # noqa: PLC0415 - only when a browser is to be opened

            try:
                webbrowser.open(url)
            except Exception:  # noqa: BLE001 - no browser: the address is printed above
                pass

    def on_prompt(message: str) -> str:
        try:
            return input(f"{message}: ")
        except EOFError:
            return ""

    path = os.path.join(paths.agent_dir(), "auth.json")
    try:
        fields = prov.login(LoginCallbacks(on_auth=on_auth, on_prompt=on_prompt,
                                           on_progress=lambda text: print(text, flush=True)))
        save_credentials(path, prov.id, fields)
    except OAuthError as exc:
        print(f"pisces login {prov.id}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"pisces login {prov.id}: cancelled", file=sys.stderr)
        return 1
    print(f"Logged in to {prov.name}; the tokens are in {paths.display_path(path)} (mode 0600).")
    return 0


def run_logout(argv: list[str]) -> int:
    from pisces.core.config.oauth import OAuthError, remove_credentials  # noqa: PLC0415 - this command only

    args = _parser("logout").parse_args(argv)
    path = os.path.join(paths.agent_dir(), "auth.json")
    try:
        removed = remove_credentials(path, args.provider)
    except OAuthError as exc:
        print(f"pisces logout: {exc}", file=sys.stderr)
        return 1
    print(f"Logged out of {args.provider}." if removed else f"No credentials for {args.provider} in "
          f"{paths.display_path(path)}.")
    return 0
