"""A real AgentSession (faux model, in memory) with inline extensions, recording every session event."""

from __future__ import annotations

from typing import Any

from pisces.core.session.build import create_agent_session_async


class Recorder:
    def __init__(self, session: Any) -> None:
        self.events: list[Any] = []
        session.subscribe(self.events.append)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if isinstance(e, dict) and e.get("type") == kind]

    def types(self) -> list[str]:
        out = []
        for e in self.events:
            out.append(e["type"] if isinstance(e, dict) else type(e).__struct_config__.tag)
        return out


async def make(tmp_path: Any, *registers: Any, start: bool = True, **kwargs: Any) -> tuple[Any, Recorder]:
    cwd = tmp_path / "work"
    cwd.mkdir(exist_ok=True)
    session = await create_agent_session_async(cwd=str(cwd), provider="faux", no_session=True,
                                               extensions=list(registers), **kwargs)
    rec = Recorder(session)
    if start:
        await session.hooks.start("startup")
    return session, rec


def bash_call(command: str, call_id: str = "c1") -> dict[str, Any]:
    return {"toolCalls": [{"name": "bash", "arguments": {"command": command}, "id": call_id}]}


def texts(message: Any) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(getattr(b, "text", "") for b in content)
