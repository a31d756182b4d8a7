"""The pending-request table and the remote session UI: first answer wins, unknown ids are ignored, every
request ends exactly once, and a timeout, an abort or the table closing ends it with the default."""

from __future__ import annotations

import asyncio

import pytest

from pisces.ai.abort import AbortSignal
from pisces.core.session.ui import NoUI, UnsupportedUIError
from pisces.modes.host.ui_requests import PendingRequests, RemoteUI


class Client:
    """Collects the frames a RemoteUI writes."""

    def __init__(self) -> None:
        self.frames: list[dict] = []
        self.sent = asyncio.Event()

    def send(self, frame: dict) -> None:
        self.frames.append(frame)
        self.sent.set()

    async def next_request(self) -> dict:
        while not any(f.get("method") not in ("cancel",) for f in self.frames):
            self.sent.clear()
            await asyncio.wait_for(self.sent.wait(), 30)
        return self.frames[0]


async def test_first_answer_wins_and_later_or_unknown_answers_are_ignored():
    client = Client()
    ui = RemoteUI(client.send)
    task = asyncio.ensure_future(ui.select("Pick", ["A", "B"]))
    request = await client.next_request()
    assert request == {"type": "extension_ui_request", "id": request["id"], "method": "select", "title": "Pick",
                       "options": ["A", "B"]}
    assert ui.answer({"id": "no-such-id", "value": "A"}) is False
    assert ui.answer({"id": request["id"], "value": "B"}) is True
    assert ui.answer({"id": request["id"], "value": "A"}) is False  # already answered
    assert await task == "B"
    assert len(ui.pending) == 0
    assert [f["method"] for f in client.frames] == ["select"]  # no cancel after an answer


async def test_fields_are_absent_not_null_and_fire_and_forget_frames():
    client = Client()
    ui = RemoteUI(client.send)
    ui.notify("hi")
    ui.set_status("k")
    ui.set_widget("w", ["a", "b"], placement="belowEditor")
    ui.set_widget("w", lambda: None)  # a component factory: nothing to send
    ui.set_title("T")
    ui.paste_to_editor("text")
    methods = [(f["method"], {k: v for k, v in f.items() if k not in ("type", "id", "method")}) for f in client.frames]
    assert methods == [("notify", {"message": "hi"}), ("setStatus", {"statusKey": "k"}),
                       ("setWidget", {"widgetKey": "w", "widgetLines": ["a", "b"], "widgetPlacement": "belowEditor"}),
                       ("setTitle", {"title": "T"}), ("set_editor_text", {"text": "text"})]
    assert all(len(f["id"]) == 36 for f in client.frames)  # uuid v4, as pi


async def test_a_timeout_resolves_to_the_default_and_tells_the_client():
    client = Client()
    ui = RemoteUI(client.send)
    assert await ui.confirm("Sure?", "really", timeout_ms=20) is False
    request, cancel = client.frames
    assert request["timeout"] == 20
    assert cancel["method"] == "cancel" and cancel["targetId"] == request["id"]
    assert ui.answer({"id": request["id"], "confirmed": True}) is False  # too late: ignored


async def test_pis_options_object_works_for_dialogs_and_widgets():
    client = Client()
    ui = RemoteUI(client.send)
    signal = AbortSignal()
    assert await ui.confirm("t", "m", {"timeout": 15}) is False
    task = asyncio.ensure_future(ui.select("s", ["a"], {"signal": signal}))
    while not any(f["method"] == "select" for f in client.frames):
        await asyncio.sleep(0)
    signal.abort()
    assert await task is None
    ui.set_widget("w", ["x"], {"placement": "belowEditor"})
    assert client.frames[0]["timeout"] == 15
    assert client.frames[-1]["widgetPlacement"] == "belowEditor"


async def test_the_default_timeout_applies_when_none_is_given():
    client = Client()
    ui = RemoteUI(client.send, default_timeout_ms=20)
    assert await ui.input("Name") is None
    assert "timeout" not in client.frames[0]  # pi's frame: no timeout field when the extension gave none
    assert client.frames[1]["method"] == "cancel"


async def test_abort_resolves_every_dialog_to_its_default():
    client = Client()
    ui = RemoteUI(client.send)
    signal = AbortSignal()
    tasks = [asyncio.ensure_future(ui.editor("Edit", "pre", signal=signal)),
             asyncio.ensure_future(ui.select("S", ["x"], signal=signal)),
             asyncio.ensure_future(ui.confirm("C", "m", signal=signal))]
    while len(client.frames) < 3:
        await asyncio.sleep(0)
    signal.abort()
    assert await asyncio.gather(*tasks) == [None, None, False]
    cancels = [f for f in client.frames if f["method"] == "cancel"]
    assert sorted(c["targetId"] for c in cancels) == sorted(f["id"] for f in client.frames[:3])
    # an already aborted signal: nothing is sent at all
    before = len(client.frames)
    assert await ui.select("late", ["x"], signal=signal) is None
    assert len(client.frames) == before


async def test_closing_ends_every_open_request_once():
    pending = PendingRequests()
    ends = []

    async def ask(i):
        ends.append(await pending.wait(f"r{i}", send=lambda: None))

    tasks = [asyncio.ensure_future(ask(i)) for i in range(3)]
    await asyncio.sleep(0)
    pending.close()
    await asyncio.gather(*tasks)
    assert ends == [{"cancelled": True, "closed": True}] * 3
    assert await pending.wait("later", send=lambda: None) == {"cancelled": True, "closed": True}
    assert pending.answer("r0", {"value": 1}) is False


async def test_updates_reach_the_open_request_only():
    pending = PendingRequests()
    updates = []
    task = asyncio.ensure_future(pending.wait("r", send=lambda: None, on_update=updates.append))
    await asyncio.sleep(0)
    assert pending.update("r", {"n": 1}) is True
    assert pending.update("other", {"n": 2}) is False
    pending.answer("r", {"done": True})
    assert await task == {"done": True}
    assert pending.update("r", {"n": 3}) is False
    assert updates == [{"n": 1}]


async def test_a_cancelled_waiter_ends_its_request_and_tells_the_client():
    client = Client()
    ui = RemoteUI(client.send)
    task = asyncio.ensure_future(ui.input("x"))
    await client.next_request()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(ui.pending) == 0 and client.frames[-1]["method"] == "cancel"


async def test_no_ui_answers_defaults_at_once_and_custom_fails_clearly():
    ui = NoUI()
    assert ui.has_ui is False
    assert await ui.select("t", ["a"]) is None and await ui.confirm("t", "m") is False
    assert await ui.input("t") is None and await ui.editor("t") is None
    assert (await ui.request({"type": "approval_request"}))["cancelled"] is True
    with pytest.raises(UnsupportedUIError, match="not supported"):
        await ui.custom(lambda: None)
    with pytest.raises(UnsupportedUIError):
        await RemoteUI(lambda f: None).custom()


async def test_generic_requests_keep_their_frame_and_return_the_answer():
    client = Client()
    ui = RemoteUI(client.send)
    task = asyncio.ensure_future(ui.request({"type": "approval_request", "toolName": "bash"}, timeout_ms=30_000))
    request = await client.next_request()
    assert request["type"] == "approval_request" and request["toolName"] == "bash"
    ui.pending.answer(request["id"], {"type": "approval_response", "id": request["id"], "approved": True})
    assert (await task)["approved"] is True
    timed = await ui.request({"type": "approval_request"}, timeout_ms=10)
    assert timed == {"cancelled": True, "timedOut": True}


async def test_many_clients_first_answer_wins_and_the_others_are_told():
    client = Client()  # one send that a web host would broadcast to every client
    ui = RemoteUI(client.send, cancel_when_answered=True)
    task = asyncio.ensure_future(ui.select("Pick", ["A", "B"]))
    request = await client.next_request()
    assert ui.answer({"id": request["id"], "value": "A"}) is True  # the first client
    assert ui.answer({"id": request["id"], "value": "B"}) is False  # the second, too late
    assert await task == "A"
    assert client.frames[-1]["method"] == "cancel" and client.frames[-1]["targetId"] == request["id"]
