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
from mcp.server.mcpserver.prompts import Prompt


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

    @app.tool()
    async def slow(seconds: float = 600) -> str:
        """Sleep, then answer."""
        import asyncio

        await asyncio.sleep(seconds)
        return "slept"

    @app.tool()
    async def grow(ctx: Context) -> str:
        """Add a prompt and a resource, and say that both lists changed."""

        def later(subject: str, tone: str = "plain") -> str:
            """Added while running."""
            return f"Later: {subject} ({tone})"

        app.add_prompt(Prompt.from_function(later, name="later"))

        @app.resource("note://later")
        def later_note() -> str:
            return "later resource"

        await ctx.session.send_prompt_list_changed()
        await ctx.session.send_resource_list_changed()
        return "grown"

    @app.prompt()
    def review(topic: str) -> str:
        """A review prompt."""
        return f"Please review {topic}."

    @app.resource("note://hello")
    def hello() -> str:
        return "hello resource"

    return app


def huge_server(megabytes: int) -> None:
    """A JSON-RPC server written by hand whose tool 'huge' answers one line of ``megabytes`` MB (the id last),
    and 'small' answers normally."""
    import json

    def send(obj):
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        msg = json.loads(line)
        method, ident = msg.get("method"), msg.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": ident, "result": {
                "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "huge", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [
                {"name": n, "inputSchema": {"type": "object"}} for n in ("huge", "small")]}})
        elif method == "tools/call" and msg["params"]["name"] == "huge":
            out = sys.stdout
            out.write('{"jsonrpc": "2.0", "result": {"content": [{"type": "text", "text": "')
            block = "x" * (1 << 20)
            for _ in range(megabytes):
                out.write(block)
            out.write('"}]}, "id": %s}\n' % json.dumps(ident))
            out.flush()
        elif method == "tools/call":
            send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": "small"}]}})
        elif ident is not None:
            send({"jsonrpc": "2.0", "id": ident, "result": {}})


def many_server(count: int):
    """A server with ``count`` tools shaped like a hosted service's (GitHub's, Linear's): a paragraph of
    description and five documented parameters each."""
    app = MCPServer("many")
    verbs = ["list", "get", "create", "update", "delete", "search", "merge", "close"]
    nouns = ["issue", "pull_request", "comment", "branch", "release", "label", "milestone", "workflow", "review",
             "project"]
    for i in range(count):
        name = f"{verbs[i % len(verbs)]}_{nouns[(i // len(verbs)) % len(nouns)]}_{i}"
        params = ", ".join(f"{p}: str = ''" for p in ("owner", "repo", "query", "state", "cursor"))
        doc = (f"{name.replace('_', ' ').capitalize()} in a repository. Returns the matching objects with their "
               "ids, titles, authors, timestamps and URLs, paginated by cursor. Use the owner and repo of the "
               "current project unless told otherwise; state filters open or closed objects.")
        namespace: dict = {}
        exec(f"def {name}({params}) -> str:\n    return 'ok'", namespace)  # a named function with typed parameters, for the SDK's schema
        fn = namespace[name]
        fn.__doc__ = doc
        app.add_tool(fn)
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
    if kind == "parent":  # a server with a child of its own (like npx -> node), in its process group
        import subprocess

        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", *sys.argv[2:]])
        good_server().run("stdio")
        return
    if kind == "slowstart":  # a good server that takes its time to start
        time.sleep(float(sys.argv[2]))
        good_server().run("stdio")
        return
    if kind == "many":
        many_server(int(sys.argv[2])).run("stdio")
        return
    if kind == "huge":
        huge_server(int(sys.argv[2]) if len(sys.argv) > 2 else 100)
        return
    if kind == "good-sse":
        good_server().run("sse", host="127.0.0.1", port=int(sys.argv[2]))
        return
    if kind == "good-http":
        good_server().run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
        return
    good_server().run("stdio")


if __name__ == "__main__":
    main()
