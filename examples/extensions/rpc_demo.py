"""RPC extension UI demo: a Python port of pi's examples/extensions/rpc-demo.ts, with the same behaviour.

It exercises every extension UI method a headless client can answer:
- select(): on a tool_call for a dangerous bash command (Allow / Block);
- confirm(): on session_before_switch when a new session is started;
- input(): the /rpc-input command;  editor(): the /rpc-editor command;
- notify(): after each dialog;  set_status(): on turn_start / turn_end;
- set_widget() and set_title(): on session_start;  set_editor_text(): the /rpc-prefill command.

    pisces --mode rpc -e examples/extensions/rpc_demo.py
"""

import re

DANGEROUS = (re.compile(r"\brm\s+(-rf?|--recursive)", re.IGNORECASE), re.compile(r"\bsudo\b", re.IGNORECASE))


def register(pi):
    turn_count = 0

    # -- set_title, set_widget, set_status on session lifecycle --
    @pi.on("session_start")
    async def on_session_start(event, ctx):
        ctx.ui.set_title("pi RPC Demo (new session)" if event.reason == "new" else "pi RPC Demo")
        ctx.ui.set_widget("rpc-demo", ["--- RPC Extension UI Demo ---", "Loaded and ready."])
        ctx.ui.set_status("rpc-demo", f"Turns: {turn_count}")

    # -- set_status on turn lifecycle --
    @pi.on("turn_start")
    async def on_turn_start(event, ctx):
        nonlocal turn_count
        turn_count += 1
        ctx.ui.set_status("rpc-demo", f"Turn {turn_count} running...")

    @pi.on("turn_end")
    async def on_turn_end(event, ctx):
        ctx.ui.set_status("rpc-demo", f"Turn {turn_count} done")

    # -- select on dangerous tool calls --
    @pi.on("tool_call")
    async def on_tool_call(event, ctx):
        if event.tool_name != "bash":
            return None
        command = event.input.get("command", "")
        if any(p.search(command) for p in DANGEROUS):
            if not ctx.has_ui:
                return {"block": True, "reason": "Dangerous command blocked (no UI)"}
            choice = await ctx.ui.select(f"Dangerous command: {command}", ["Allow", "Block"])
            if choice != "Allow":
                ctx.ui.notify("Command blocked by user", "warning")
                return {"block": True, "reason": "Blocked by user"}
            ctx.ui.notify("Command allowed", "info")
        return None

    # -- confirm on session clear --
    @pi.on("session_before_switch")
    async def on_before_switch(event, ctx):
        if event.reason != "new" or not ctx.has_ui:
            return None
        confirmed = await ctx.ui.confirm("Clear session?", "All messages will be lost.")
        if not confirmed:
            ctx.ui.notify("Clear cancelled", "info")
            return {"cancel": True}
        return None

    # -- input via command --
    @pi.command("rpc-input", description="Prompt for text input (demonstrates ctx.ui.input in RPC)")
    async def rpc_input(args, ctx):
        value = await ctx.ui.input("Enter a value", "type something...")
        ctx.ui.notify(f"You entered: {value}" if value else "Input cancelled", "info")

    # -- editor via command --
    @pi.command("rpc-editor", description="Open multi-line editor (demonstrates ctx.ui.editor in RPC)")
    async def rpc_editor(args, ctx):
        text = await ctx.ui.editor("Edit some text", "Line 1\nLine 2\nLine 3")
        if text:
            ctx.ui.notify(f"Editor submitted ({len(text.split(chr(10)))} lines)", "info")
        else:
            ctx.ui.notify("Editor cancelled", "info")

    # -- set_editor_text via command --
    @pi.command("rpc-prefill", description="Prefill the input editor (demonstrates ctx.ui.setEditorText in RPC)")
    async def rpc_prefill(args, ctx):
        ctx.ui.set_editor_text("This text was set by the rpc-demo extension.")
        ctx.ui.notify("Editor prefilled", "info")
