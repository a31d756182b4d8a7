"""``pisces mcp list``, ``pisces mcp login SERVER`` and ``pisces mcp logout SERVER`` (docs/mcp.md).

``login`` authorizes pisces with a remote server that uses OAuth: it opens the authorization address with the
system's browser (``$BROWSER`` when set; the address is printed too), waits for the redirect on 127.0.0.1 (five
minutes at most) and saves the registered client and the tokens privately in the agent dir. ``logout`` deletes
them. ``list`` prints the configured servers (project servers only in a trusted project). Exit status: 0 done,
1 the authorization failed, 2 a usage error (no such server, not a remote one).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys

from pisces.core.config.paths import agent_dir
from pisces.core.config.settings import Settings
from pisces.core.mcp.config import load_config, untrusted_message


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pisces mcp", description="MCP servers: list them, authorize pisces.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the configured servers")
    login = sub.add_parser("login", help="authorize pisces with a remote server (OAuth)")
    login.add_argument("server")
    logout = sub.add_parser("logout", help="forget the saved authorization of a server")
    logout.add_argument("server")
    return parser


def run_mcp(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    adir, cwd = agent_dir(), os.getcwd()
    config = load_config(cwd, adir, imports=Settings(adir, cwd).get("mcp.importConfigs"))
    for error in config.errors:
        sys.stderr.write(f"pisces: mcp: {error}\n")
    if args.command == "list":
        for one in config.servers.values():
            where = one.url if one.transport != "stdio" else " ".join([one.command, *one.args])
            off = "" if one.enabled and one.name not in config.disabled else " (disabled)"
            print(f"{one.name}\t{one.transport}\t{one.scope}\t{where}{off}")
        if config.untrusted:
            sys.stderr.write(f"pisces: {untrusted_message(config.untrusted)}\n")
        return 0
    cfg = config.servers.get(args.server)
    if cfg is None:
        hint = f" ({untrusted_message(config.untrusted)})" if any(s.name == args.server for s in config.untrusted) \
            else ""
        sys.stderr.write(f"pisces: no MCP server named {args.server!r}{hint}\n")
        return 2
    if cfg.transport == "stdio":
        sys.stderr.write(f"pisces: {args.server} is a stdio server: it has no OAuth login\n")
        return 2
    from pisces.core.mcp import oauth  # noqa: PLC0415 - the SDK, only for this command

    if args.command == "logout":
        with contextlib.suppress(FileNotFoundError):
            os.remove(oauth.FileStorage(adir, cfg).path)
        print(f"pisces: the authorization of {args.server} is forgotten")
        return 0
    try:
        status = asyncio.run(oauth.login(adir, cfg))
    except Exception as exc:  # noqa: BLE001 - said plainly, with the server's words
        first: BaseException = exc
        while isinstance(first, BaseExceptionGroup) and first.exceptions:
            first = first.exceptions[0]
        sys.stderr.write(f"pisces: the authorization of {args.server} failed: {type(first).__name__}: {first}\n")
        return 1
    print(f"pisces: {args.server} is authorized (saved in {oauth.FileStorage(adir, cfg).path}); "
          "a running session connects it with mcp_reconnect")
    return 0 if status.get("authorized") else 1
