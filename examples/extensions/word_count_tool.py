"""A custom tool: ``word_count`` counts the lines, words and characters of a file in the project.

It shows the parts of a tool: a JSON Schema for its parameters, an async ``execute`` that honours the abort
signal and streams progress with ``on_update``, a result with ``details``, and raising for an error.

    pisces --mode rpc -e examples/extensions/word_count_tool.py
"""

import asyncio
import os


def register(pi):
    @pi.tool(
        name="word_count",
        label="Word count",
        description="Count the lines, words and characters of a text file.",
        parameters={"type": "object", "properties": {"path": {"type": "string", "description": "File to count"}},
                    "required": ["path"]},
        prompt_snippet="Count lines, words and characters of a text file",
    )
    async def word_count(tool_call_id, params, signal, on_update, ctx):
        path = os.path.join(ctx.cwd, params["path"].lstrip("@"))
        on_update({"content": [{"type": "text", "text": f"Reading {params['path']}..."}]})
        # file I/O on a user path runs off the event loop
        text = await asyncio.to_thread(_read, path)
        if signal is not None and signal.aborted:
            raise RuntimeError("Cancelled")
        counts = {"lines": len(text.splitlines()), "words": len(text.split()), "characters": len(text)}
        return {"content": [{"type": "text", "text": "{lines} lines, {words} words, {characters} characters"
                             .format(**counts)}],
                "details": counts}


def _read(path: str) -> str:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No such file: {path}")
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()
