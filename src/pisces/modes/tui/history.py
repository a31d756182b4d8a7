"""The transcript rebuilt from the session's messages (``get_messages``): ``/redraw`` clears the screen and
the terminal's scrollback and writes the whole conversation again; after a move in the tree the new branch's
last messages are written below what was shown.

Messages are replayed as the frames they were shown from live (``message_start`` for a user message, text
deltas, ``tool_execution_start``/``_end`` for a tool call and its result), through the transcript's own
``on_event``, so a replayed card looks as it did live.
"""

from __future__ import annotations

from typing import Any

CLEAR_ALL = "\x1b[H\x1b[2J\x1b[3J"  # home, erase the screen, erase the scrollback
REDRAW_LIMIT = 5000  # messages written by a redraw (earlier ones are counted, not drawn)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(c.get("text", "")) for c in content or [] if isinstance(c, dict) and c.get("type") == "text")


def replay(app: Any, messages: list[dict[str, Any]]) -> None:
    """``messages`` written to the scrollback as they were shown live."""
    t = app.transcript
    calls: dict[str, dict[str, Any]] = {}
    for m in messages:
        role = m.get("role")
        if role == "user":
            t.on_event({"type": "message_start", "message": m})
        elif role == "assistant":
            for block in m.get("content") or []:
                kind = block.get("type")
                if kind == "text":
                    t.on_event({"type": "message_update", "assistantMessageEvent":
                                {"type": "text_delta", "delta": block.get("text", "")}})
                elif kind == "thinking":
                    t.on_event({"type": "message_update", "assistantMessageEvent":
                                {"type": "thinking_delta", "delta": block.get("thinking", "")}})
                    t.on_event({"type": "message_update", "assistantMessageEvent": {"type": "thinking_end"}})
                elif kind == "toolCall":
                    calls[str(block.get("id"))] = block
            t.on_event({"type": "message_end", "message": {"role": "assistant", "stopReason": m.get("stopReason"),
                                                          "errorMessage": m.get("errorMessage")}})
        elif role == "toolResult":
            call = calls.pop(str(m.get("toolCallId")), {})
            ident = str(m.get("toolCallId"))
            name = str(m.get("toolName") or call.get("name") or "tool")
            t.on_event({"type": "tool_execution_start", "toolCallId": ident, "toolName": name,
                        "args": call.get("arguments")})
            t.on_event({"type": "tool_execution_end", "toolCallId": ident, "toolName": name,
                        "result": {"content": m.get("content") or []}, "isError": bool(m.get("isError"))})
        elif role == "bashExecution":
            ident = f"replay-bash-{id(m)}"
            t.on_event({"type": "tool_execution_start", "toolCallId": ident, "toolName": "bash",
                        "args": {"command": m.get("command", "")}})
            t.on_event({"type": "tool_execution_end", "toolCallId": ident, "toolName": "bash",
                        "result": {"content": [{"type": "text", "text": str(m.get("output", ""))}]},
                        "isError": bool(m.get("exitCode"))})
        elif role in ("compactionSummary", "branchSummary"):
            what = "compaction summary" if role == "compactionSummary" else "summary of a branch left"
            t.note(f"{what}: {str(m.get('summary', ''))[:400]}", 2)
        elif role == "custom" and m.get("display", True):
            t.note(_text_of(m.get("content")), 36)


async def rebuild(app: Any, *, clear: bool, limit: int = 40) -> int:
    """The session's messages written again (all of them when ``clear``, which first erases the screen and
    the scrollback; else the last ``limit``). Returns how many were written."""
    resp = await app.client.request({"type": "get_messages"})
    if not resp.get("success"):
        raise RuntimeError(resp.get("error", "get_messages failed"))
    messages = list((resp.get("data") or {}).get("messages") or [])
    keep = REDRAW_LIMIT if clear else limit
    if clear:
        app.renderer.clear_live()
        app._write(CLEAR_ALL)
    if len(messages) > keep:
        app.transcript.note(f"… {len(messages) - keep} earlier messages", 2)
        messages = messages[-keep:]
    replay(app, messages)
    app.schedule()
    return len(messages)
