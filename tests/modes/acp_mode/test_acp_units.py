"""Small pieces of the ACP mode in isolation: the outbox gate, prompt content, the event translator."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from acp import image_block, resource_block, resource_link_block, text_block
from acp.helpers import embedded_text_resource
from acp.schema import AudioContentBlock

from pisces.agent.types import MessageUpdateEvent
from pisces.modes.acp.content import prompt_from_blocks
from pisces.modes.acp.outbox import Outbox, ResponseWatch
from pisces.modes.acp.translate import TurnTranslator


def _frame(direction: str, message: dict) -> SimpleNamespace:
    return SimpleNamespace(direction=SimpleNamespace(value=direction), message=message)


async def test_an_outbox_sends_nothing_until_the_response_naming_its_session_was_written():
    sent: list[str] = []

    async def send(update: str) -> None:
        sent.append(update)

    watch = ResponseWatch()
    new_box, load_box, failed_box = Outbox(send), Outbox(send), Outbox(send)
    watch.observe(_frame("incoming", {"id": 1, "method": "session/new", "params": {"cwd": "/"}}))
    watch.observe(_frame("incoming", {"id": 2, "method": "session/load", "params": {"sessionId": "s-load"}}))
    watch.observe(_frame("incoming", {"id": 3, "method": "session/new", "params": {"cwd": "/"}}))
    watch.expect("s-new", new_box)
    watch.expect("s-load", load_box)
    watch.expect("s-failed", failed_box)
    for box, name in ((new_box, "new"), (load_box, "load"), (failed_box, "failed")):
        box.post(f"{name}-1")
        box.post(f"{name}-2")
    for _ in range(5):
        await asyncio.sleep(0)
    assert sent == []  # the pumps run, but the outboxes are closed
    watch.observe(_frame("outgoing", {"id": 1, "result": {"sessionId": "s-new"}}))
    await asyncio.wait_for(new_box.flush(), 30)
    assert sent == ["new-1", "new-2"]
    watch.observe(_frame("outgoing", {"id": 3, "error": {"code": -32603, "message": "no"}}))
    watch.observe(_frame("outgoing", {"id": 2, "result": {}}))
    await asyncio.wait_for(load_box.flush(), 30)
    assert sent == ["new-1", "new-2", "load-1", "load-2"] and not failed_box.is_open
    for box in (new_box, load_box, failed_box):
        await box.close()


async def test_an_outbox_whose_client_stops_reading_stops_the_run_once_and_stays_bounded():
    sent: list[int] = []
    reading = asyncio.Event()
    overflows: list[int] = []

    async def send(update: int) -> None:
        await reading.wait()  # a client that does not read: the first write never completes
        sent.append(update)

    box = Outbox(send, limit=10, on_overflow=lambda: overflows.append(len(sent)))
    box.open()
    for i in range(100):
        box.post(i)
    await asyncio.sleep(0)
    assert overflows == [0]  # once, when the tenth update was waiting
    assert box.dropped == 100 - 20  # past twice the limit nothing more is held
    reading.set()  # the client reads again: what was kept arrives in order
    await asyncio.wait_for(box.flush(), 30)
    assert sent == list(range(20))
    await box.close()


def test_prompt_content_keeps_links_inline_and_appends_embedded_files():
    text, images = prompt_from_blocks([
        text_block("Look at "), resource_link_block("app.py", "file:///w/app.py"), text_block(" please"),
        resource_block(embedded_text_resource("file:///w/app.py", "x = 1  # unsaved")),
        image_block("aGk=", "image/png"), AudioContentBlock(type="audio", data="AA==", mime_type="audio/wav")])
    assert text.startswith("Look at [app.py](file:///w/app.py) please[audio not included")
    assert text.endswith('<context ref="file:///w/app.py">\nx = 1  # unsaved\n</context>')
    assert [(i.data, i.mimeType) for i in images] == [("aGk=", "image/png")]


def test_plan_events_become_plan_updates_and_a_bad_event_never_raises():
    posted: list = []
    translator = TurnTranslator("/w", posted.append)
    translator.on_event({"type": "plan", "entries": [{"content": "Read the code", "status": "completed"},
                                                     {"content": "Fix", "priority": "high", "status": "bogus"}]})
    translator.on_event({"type": "plan", "entries": "not a list"})
    translator.on_event({"type": "session_info_changed", "name": "Refactor"})
    translator.begin()
    translator.on_event(MessageUpdateEvent(message=None, assistantMessageEvent=object()))  # logged, not raised
    (plan, info) = posted
    assert [(e.content, e.status, e.priority) for e in plan.entries] == [
        ("Read the code", "completed", "medium"), ("Fix", "pending", "high")]
    assert info.title == "Refactor"
