"""A status line: the client's footer shows the turn in progress and the tools run so far.

    pisces --mode rpc -e examples/extensions/status_line.py
"""


def register(pi):
    state = {"turns": 0, "tools": 0}

    def show(ctx, text):
        ctx.ui.set_status("status-line", f"{text} | tools: {state['tools']}")

    @pi.on("session_start")
    def ready(event, ctx):
        show(ctx, "Ready")

    @pi.on("turn_start")
    def turn_start(event, ctx):
        state["turns"] += 1
        show(ctx, f"Turn {state['turns']}...")

    @pi.on("tool_execution_end")
    def tool_done(event, ctx):
        state["tools"] += 1

    @pi.on("turn_end")
    def turn_end(event, ctx):
        show(ctx, f"Turn {state['turns']} complete")
