"""Seed items pisces used to refuse or drop, through the real ``pisces --mode rpc``: images given by URL
(fetched with a size and a time bound, clear errors), legacy ``attachments`` echoed on the UserMessage, and
``fullOutputPath: null`` on a BashExecutionMessage."""

from __future__ import annotations

import base64
import http.server
import threading

import pytest

PNG_1PX = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
PNG_B64 = base64.b64encode(PNG_1PX).decode()


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/dot.png":
            body, kind = PNG_1PX, "image/png"
        elif self.path == "/page.html":
            body, kind = b"<html>not an image</html>", "text/html"
        elif self.path == "/huge.png":  # claims 64 MB: refused before reading
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(64 << 20))
            self.end_headers()
            return
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def user_messages(frames: list[dict]) -> list[dict]:
    return [f["message"] for f in frames if f.get("type") == "message_end" and f["message"]["role"] == "user"]


def test_images_by_url_are_fetched_and_bad_ones_refused(home, spawn, server):
    p = spawn("--no-session", "--faux-script", home.faux_script([{"text": "seen"}]))
    p.send({"id": "p", "type": "prompt", "message": "look",
            "images": [{"type": "image", "source": {"type": "url", "url": f"{server}/dot.png"}}]})
    frames = p.until_type("agent_settled", 30)
    [user] = user_messages(frames)
    assert user["content"] == [{"type": "text", "text": "look"},
                               {"type": "image", "data": PNG_B64, "mimeType": "image/png"}]
    for image, needle in (
            ({"type": "image", "url": f"{server}/page.html"}, "is not a png, jpeg, gif or webp image"),
            ({"type": "image", "url": f"{server}/missing.png"}, "failed: HTTP 404"),
            ({"type": "image", "data": f"{server}/huge.png"}, "is larger than 20 MB"),
            ({"type": "image", "source": {"type": "url", "url": "file:///etc/passwd"}}, "only http and https"),
            ({"type": "image", "url": "http://127.0.0.1:9/x.png"}, "failed")):
        r = p.request({"type": "prompt", "message": "again", "images": [image]}, timeout=60)
        assert r["success"] is False and needle in r["error"] and "images[0]" in r["error"], r
    assert p.ok({"type": "get_state"})["messageCount"] == 2  # nothing of the refused prompts was taken


def test_attachments_are_echoed_and_bash_messages_carry_null_keys(home, spawn):
    p = spawn("--no-session", "--faux-script", home.faux_script([{"text": "ok"}]))
    attachments = [{"id": "a1", "type": "image", "fileName": "dot.png", "mimeType": "image/png", "size": 70,
                    "content": PNG_B64},
                   {"id": "a2", "type": "document", "fileName": "n.txt", "mimeType": "text/plain", "size": 5,
                    "content": "", "extractedText": "notes"}]
    p.send({"id": "p", "type": "prompt", "message": "see these", "attachments": attachments})
    [user] = user_messages(p.until_type("agent_settled", 30))
    assert user["attachments"] == attachments
    assert user["content"][1] == {"type": "image", "data": PNG_B64, "mimeType": "image/png"}
    assert user["content"][2] == {"type": "text", "text": '<file name="n.txt">\nnotes\n</file>'}
    plain = p.ok({"type": "get_messages"})["messages"][0]
    assert plain["attachments"] == attachments  # kept in the context as well

    p.ok({"type": "bash", "command": "echo hi"})
    bash = p.ok({"type": "get_messages"})["messages"][-1]
    assert {k: bash[k] for k in ("role", "command", "output", "exitCode", "cancelled", "truncated",
                                 "fullOutputPath")} == {
        "role": "bashExecution", "command": "echo hi", "output": "hi\n", "exitCode": 0, "cancelled": False,
        "truncated": False, "fullOutputPath": None}


def test_a_prompt_without_attachments_has_no_attachments_key(home, spawn):
    p = spawn("--no-session", "--faux-script", home.faux_script([{"text": "ok"}]))
    p.send({"type": "prompt", "message": "plain"})
    [user] = user_messages(p.until_type("agent_settled", 30))
    assert "attachments" not in user  # pi 0.73.1's shape is unchanged
