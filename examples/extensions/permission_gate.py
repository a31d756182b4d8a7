"""Permission gate: asks before a destructive bash command runs (rm -r, sudo, chmod/chown 777, dd, mkfs, ...).

With a UI (RPC) the client gets a select dialog; the answer "Yes" lets the command run. Without a UI (print and
json modes), or when nobody answers in time, the command is blocked: the gate fails closed.

    pisces --mode rpc -e examples/extensions/permission_gate.py
"""

import re

DANGEROUS = [re.compile(p, re.IGNORECASE) for p in (
    r"\brm\s+(-[a-z]*r[a-z]*|--recursive)\b", r"\bsudo\b", r"\b(chmod|chown)\b.*\b777\b", r"\bdd\s+if=",
    r"\bmkfs(\.\w+)?\b", r"\bgit\s+(push\s+.*--force|reset\s+--hard|clean\s+-[a-z]*f)")]

ASK_TIMEOUT_MS = 120_000  # nobody answered in two minutes: block


def is_dangerous(command: str) -> bool:
    return any(p.search(command) for p in DANGEROUS)


def register(pi):
    @pi.on("tool_call")
    async def gate(event, ctx):
        if event.tool_name != "bash" or not is_dangerous(event.input.get("command", "")):
            return None
        command = event.input["command"]
        if not ctx.has_ui:
            return {"block": True, "reason": "Dangerous command blocked (no UI for confirmation)"}
        choice = await ctx.ui.select(f"Dangerous command:\n\n  {command}\n\nAllow?", ["Yes", "No"],
                                     timeout_ms=ASK_TIMEOUT_MS, signal=ctx.signal)
        if choice != "Yes":
            return {"block": True, "reason": "Blocked by user" if choice else "Blocked: no answer"}
        return None
