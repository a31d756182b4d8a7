"""The host's dispatch in process: a fake client attached to a Host over a faux session.

Every front end (stdio, browsers, the terminal UI) is a client of this host and runs this command table, so a
change to a handler or to routing can be tested here without spawning pisces."""

from __future__ import annotations

import asyncio
import json

import pytest

from pisces.core.session.build import create_agent_session_async
from pisces.modes.host.framing import parse_line
from pisces.modes.host.host import Client, Host


class FakeClient(Client):
    """Keeps every frame it is sent, decoded."""

    def __init__(self, host: Host, **kwargs) -> None:
        super().__init__(host, **kwargs)
        self.frames: list[dict] = []
        self.arrived = asyncio.Event()

    def send_bytes(self, frame: bytes) -> None:
        assert frame.endswith(b"\n") and frame.count(b"\n") == 1, "one frame a line"
        self.frames.append(json.loads(frame))
        self.arrived.set()

    def send(self, line: str) -> bool:
        return self.host.dispatch(self, *parse_line(line.encode()))

    def responses(self) -> list[dict]:
        return [f for f in self.frames if f.get("type") == "response"]

    async def wait_for(self, predicate, timeout: float = 30) -> dict:
        async def scan() -> dict:
            seen = 0
            while True:
                for frame in self.frames[seen:]:
                    if predicate(frame):
                        return frame
                seen = len(self.frames)
                self.arrived.clear()
                await self.arrived.wait()

        return await asyncio.wait_for(scan(), timeout)


@pytest.fixture
async def host(tmp_path, faux):
    cwd = tmp_path / "work"
    cwd.mkdir()
    session = await create_agent_session_async(cwd=str(cwd), provider="faux", no_session=True)
    host = Host(session)
    session.subscribe(host.broadcast)
    yield host
    await host.shutdown()


async def test_a_synchronous_command_is_answered_to_the_asker_with_its_id(host):
    a, b = FakeClient(host), FakeClient(host)
    host.attach(a)
    host.attach(b)
    assert a.send('{"id":"s1","type":"get_state"}') is False  # answered at once
    [response] = a.responses()
    assert response["id"] == "s1" and response["command"] == "get_state" and response["success"] is True
    assert response["data"]["model"]["provider"] == "faux" and response["data"]["isStreaming"] is False
    assert b.frames == [], "a response goes to the client that asked, nobody else"


async def test_an_alias_is_answered_under_the_name_the_client_used(host):
    a = FakeClient(host)
    host.attach(a)
    a.send('{"id":"q","type":"set_queue_mode","mode":"all"}')
    [response] = a.responses()
    assert response["command"] == "set_queue_mode" and response["success"] is True
    assert host.session.get_state()["steeringMode"] == "all"


async def test_bad_input_gets_pis_error_texts_and_the_host_keeps_serving(host):
    a = FakeClient(host)
    host.attach(a)
    a.send("this is not json")
    a.send('{"id":"u","type":"no_such_command"}')
    a.send('{"id":"n","type":"set_model","provider":"faux","modelId":"missing"}')
    a.send('{"id":"ok","type":"get_state"}')
    parse, unknown, missing, ok = a.responses()
    assert parse["success"] is False and parse["error"].startswith("Failed to parse command:")
    assert unknown == {"id": "u", "type": "response", "command": "no_such_command", "success": False,
                       "error": "Unknown command: no_such_command"}
    assert missing["id"] == "n" and missing["error"] == "Model not found: faux/missing"
    assert ok["id"] == "ok" and ok["success"] is True


async def test_a_prompt_is_acknowledged_then_its_events_reach_every_client(host, faux):
    a, b = FakeClient(host), FakeClient(host)
    host.attach(a)
    host.attach(b)
    faux.enqueue({"text": "reply for everyone"})
    assert a.send('{"id":"p","type":"prompt","message":"hi"}') is True  # asynchronous
    await a.wait_for(lambda f: f.get("type") == "agent_end")
    await b.wait_for(lambda f: f.get("type") == "agent_end")
    kinds_a = [f["type"] for f in a.frames]
    assert kinds_a.index("response") < kinds_a.index("agent_start"), "pi acknowledges before the run"
    assert [f for f in b.frames if f["type"] == "response"] == []
    assert [f["type"] for f in b.frames] == [k for k in kinds_a if k != "response"]
    end = next(f for f in a.frames if f["type"] == "message_end" and f["message"]["role"] == "assistant")
    assert end["message"]["content"] == [{"type": "text", "text": "reply for everyone"}]


async def test_a_detached_client_gets_nothing_more(host, faux):
    a, b = FakeClient(host), FakeClient(host)
    host.attach(a)
    host.attach(b)
    host.detach(b)
    faux.enqueue({"text": "only a sees this"})
    a.send('{"id":"p","type":"prompt","message":"hi"}')
    await a.wait_for(lambda f: f.get("type") == "agent_end")
    assert b.frames == [] and b.closed


async def test_a_prompt_that_fails_after_its_ack_gets_a_second_response_with_its_id(host, monkeypatch):
    """Seed 000: prompt "return[s] immediate success, then may emit a later error response with the same id"."""
    async def accepted_then_failing(text, *, on_accepted=None, **kwargs):
        on_accepted()
        await asyncio.sleep(0)
        raise RuntimeError("the run could not start: disk full")

    monkeypatch.setattr(host.session, "prompt", accepted_then_failing)
    a = FakeClient(host)
    host.attach(a)
    a.send('{"id":"p","type":"prompt","message":"hi"}')
    await a.wait_for(lambda f: f.get("type") == "response" and f.get("success") is False)
    assert a.responses() == [
        {"id": "p", "type": "response", "command": "prompt", "success": True},
        {"id": "p", "type": "response", "command": "prompt", "success": False,
         "error": "the run could not start: disk full"}]


async def test_get_messages_last_sends_only_the_end_and_the_total(host, faux):
    a = FakeClient(host)
    host.attach(a)
    faux.enqueue({"text": "first reply"})
    a.send('{"id":"p","type":"prompt","message":"hi"}')
    await a.wait_for(lambda f: f.get("type") == "agent_end")
    a.send('{"id":"all","type":"get_messages"}')
    a.send('{"id":"one","type":"get_messages","last":1}')
    a.send('{"id":"none","type":"get_messages","last":0}')
    a.send('{"id":"bad","type":"get_messages","last":"x"}')
    by_id = {r["id"]: r["data"] for r in a.responses() if r["command"] == "get_messages"}
    assert len(by_id["all"]["messages"]) == 2 and "total" not in by_id["all"]  # pi's shape unchanged
    assert by_id["one"] == {"messages": by_id["all"]["messages"][-1:], "total": 2}
    assert by_id["none"] == {"messages": [], "total": 2}
    assert by_id["bad"] == by_id["all"]  # not an integer: the whole list, as without it
