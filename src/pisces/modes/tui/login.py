"""``/login [PROVIDER]`` and ``/logout PROVIDER`` in the terminal UI: the same flows as ``pisces login``.

The flow runs on a worker thread (it waits on the network and on the user's browser); what it has to show
(the address, the code) is posted to the transcript from the event loop. The tokens go to the agent
directory's ``auth.json``, which the host re-reads when it changes, so the next prompt uses them. GitHub
Enterprise domains and pasting a redirect address are for ``pisces login`` (a dialog-free terminal prompt).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pisces.core.config import paths


async def run(app: Any, name: str, rest: str) -> None:
    from pisces.core.config.oauth import (  # noqa: PLC0415 - the flows load on /login only
        LoginCallbacks,
        OAuthError,
        providers,
        remove_credentials,
        save_credentials,
    )

    t = app.transcript
    path = os.path.join(paths.agent_dir(), "auth.json")
    offered = providers()
    if name == "/logout":
        if not rest:
            t.note("/logout PROVIDER (" + ", ".join(offered) + ")", 31)
            return
        removed = await asyncio.to_thread(remove_credentials, path, rest)
        t.note(f"logged out of {rest}" if removed else f"no credentials for {rest}", 2)
        return
    prov = offered.get(rest)
    if prov is None:
        for p in offered.values():
            t.note(f"/login {p.id:16} {p.name}: {p.why}", 2)
        if rest:
            t.note(f"no login for '{rest}' (other providers take a key: docs/providers.md)", 31)
        return
    loop = asyncio.get_running_loop()

    def show(text: str, *codes: int) -> None:
        def post() -> None:
            t.note(text, *codes)
            app.schedule()
        loop.call_soon_threadsafe(post)

    def on_auth(url: str, instructions: str) -> None:
        show(f"open {url}")
        show(instructions, 1)
        if prov.id == "openai-codex":
            import webbrowser  # noqa: PLC0415 - only when a browser is to be opened

            try:
                webbrowser.open(url)
            except Exception:  # noqa: BLE001 - no browser: the address is shown above
                pass

    def flow() -> dict[str, Any]:
        fields = prov.login(LoginCallbacks(on_auth=on_auth, on_prompt=lambda message: "",
                                           on_progress=lambda text: show(text, 2),
                                           should_stop=lambda: app.done.is_set()))
        save_credentials(path, prov.id, fields)
        return fields

    t.note(f"logging in to {prov.name}…", 2)
    try:
        await asyncio.to_thread(flow)
    except OAuthError as exc:
        t.note(f"/login {prov.id}: {exc}", 31)
        return
    t.note(f"logged in to {prov.name} (tokens in {paths.display_path(path)}, mode 0600)", 32)
