"""``--mode rpc --web`` with a stdio peer that never reads stdout: the browsers are served all the same (their
prompt runs, get_state and abort are answered), and once the stdio queue passes its bound, pisces says so."""

from __future__ import annotations

from webproc import WebProc


def test_a_stdio_peer_that_stops_reading_does_not_stall_the_browsers(home):
    words = "word " * 4000  # the full stream of one such reply is tens of MB: far past a pipe's 64 KB
    script = home.faux_script({"responses": [{"text": words, "chunkSize": 5}], "loop": True})
    with WebProc(home, "--provider", "faux", "--faux-script", script, "--no-session", rpc=True,
                 read_stdout=False) as w:
        browser = w.ws("?profile=deltas")
        w.recv(browser)
        for i in range(3):  # well past the pipe's buffer: the old writer blocked the loop inside the first run
            assert w.request(browser, {"id": f"p{i}", "type": "prompt", "message": f"go {i}"})["success"] is True
            w.until(browser, lambda f: f.get("type") == "agent_settled", 60)
            state = w.request(browser, {"id": f"s{i}", "type": "get_state"})
            assert state["success"] is True and state["data"]["isStreaming"] is False
        assert w.request(browser, {"id": "ab", "type": "abort"})["success"] is True
