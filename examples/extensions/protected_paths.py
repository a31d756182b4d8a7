"""Protected paths: the write and edit tools may not touch .env files, .git/ or node_modules/.

    pisces --mode rpc -e examples/extensions/protected_paths.py
"""

import os

PROTECTED = (".env", ".git/", "node_modules/")


def is_protected(path: str) -> bool:
    path = path.replace(os.sep, "/")
    name = path.rsplit("/", 1)[-1]
    return name == ".env" or name.startswith(".env.") or any(p in f"/{path}" for p in ("/.git/", "/node_modules/"))


def register(pi):
    @pi.on("tool_call")
    async def guard(event, ctx):
        if event.tool_name not in ("write", "edit"):
            return None
        path = str(event.input.get("path", ""))
        if is_protected(path):
            if ctx.has_ui:
                ctx.ui.notify(f"Blocked write to protected path: {path}", "warning")
            return {"block": True, "reason": f'Path "{path}" is protected'}
        return None
