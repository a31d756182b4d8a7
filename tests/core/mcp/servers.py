"""MCP servers for the tests, run as ``python servers.py <kind> [port]``.

``good``: an SDK server (tools echo, add, big, schema_ref, notify; a prompt; a resource) over stdio, or over
Streamable HTTP on 127.0.0.1:<port> with ``good-http``. Hostile ones: ``crash`` (exits at start), ``hang``
(never answers initialize), ``garbage`` (invalid JSON lines, then a good server), ``flood`` (a good server
whose ``flood`` tool sends 5000 list_changed notifications).
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import Context, MCPServer


def good_server():
    app = MCPServer("good")

    @app.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return f"echo: {text}"

    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @app.tool()
    def big(megabytes: int = 1) -> str:
        """Return a huge text."""
        return "x" * (megabytes << 20)

    @app.tool()
    def pid() -> str:
        """The server's process id."""
        return str(os.getpid())

    @app.tool()
    async def flood(ctx: Context) -> str:
        """Add the tool 'late', then send 2000 tools/list_changed notifications."""

        def late() -> str:
            """Added while running."""
            return "late"

        app.add_tool(late)
        for _ in range(2000):
            await ctx.session.send_tool_list_changed()
        return "flooded"

    @app.prompt()
    def review(topic: str) -> str:
        """A review prompt."""
        return f"Please review {topic}."

    @app.resource("note://hello")
    def hello() -> str:
        return "hello resource"

    return app


def main() -> None:
    kind = sys.argv[1]
    if kind == "crash":
        sys.stderr.write("crashing at start\n")
        sys.exit(3)
    if kind == "hang":
        sys.stdin.read()  # never answers
        time.sleep(3600)
    if kind == "garbage":
        sys.stdout.write("this is not json\n{\"also\": broken\n")
        sys.stdout.flush()
    if kind == "good-http":
        good_server().run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
        return
    good_server().run("stdio")


if __name__ == "__main__":
    main()
