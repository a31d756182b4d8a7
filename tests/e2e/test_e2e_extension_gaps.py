"""Extension API items pi has and pisces used to accept silently or fail on obscurely, through the real
``pisces --mode rpc``: a message_end handler replacing the finished message (kept in the context and the
file), register_provider with streamSimple or oauth refused with a sentence, npm:/git: package sources refused
with a sentence."""

from __future__ import annotations

import json
import os

from test_e2e_extensions import write_ext


def test_message_end_handler_replaces_the_message(home, spawn):
    ext = write_ext(home, "redact.py", """
        import json

        import msgspec

        def register(pi):
            @pi.on("message_end")
            def redact(event):
                m = msgspec.to_builtins(event["message"])  # the message as pi's JSON shape
                if m["role"] == "assistant" and "SECRET" in json.dumps(m["content"]):
                    return {"message": {**m, "content": [{"type": "text", "text": "[redacted]"}]}}
                if m["role"] == "user":
                    return {"message": {"role": "assistant", "content": [], "api": "x", "provider": "x",
                                        "model": "x", "usage": {}, "stopReason": "stop"}}  # role change: refused
        """)
    p = spawn("--faux-script", home.faux_script([{"text": "the SECRET is 42"}]), "-e", ext)
    p.send({"id": "go", "type": "prompt", "message": "tell me"})
    frames = p.until_type("agent_settled", 30)
    end = [f for f in frames if f["type"] == "message_end" and f["message"]["role"] == "assistant"][0]
    assert end["message"]["content"] == [{"type": "text", "text": "[redacted]"}]
    assert p.ok({"type": "get_last_assistant_text"}) == {"text": "[redacted]"}
    errors = [f for f in frames if f.get("type") == "extension_error"]
    assert len(errors) == 1 and "must keep the role 'user'" in errors[0]["error"]
    user = [f for f in frames if f["type"] == "message_end" and f["message"]["role"] == "user"][0]
    assert user["message"]["content"] == [{"type": "text", "text": "tell me"}]
    session_file = p.ok({"type": "get_state"})["sessionFile"]
    p.close()
    with open(session_file) as f:
        text = f.read()
    assert "[redacted]" in text and "SECRET" not in text


def test_unsupported_provider_kinds_and_package_sources_are_refused_clearly(home, spawn):
    ext = write_ext(home, "prov.py", """
        def register(pi):
            pi.register_provider("mine", {"baseUrl": "http://127.0.0.1:9", "streamSimple": lambda *a: None,
                                          "models": []})
        """)
    home.write_json("settings.json", {"packages": ["npm:pi-some-extension"]})
    p = spawn("--faux-script", home.faux_script([{"text": "ok"}]), "-e", ext)
    errors = [p.until_type("extension_error")[-1], p.until_type("extension_error")[-1]]
    by_path = {e["extensionPath"]: e["error"] for e in errors}
    assert "'streamSimple' (a custom stream function) is not supported by pisces" in by_path[ext]
    npm = next(v for k, v in by_path.items() if "npm:pi-some-extension" in k)
    assert "npm:/git: package sources are not installed by pisces" in npm
    assert json.dumps(p.ok({"type": "get_state"})["model"]["provider"]) == '"faux"'  # the session still serves


def test_user_bash_operations_are_refused_not_run_locally(home, spawn):
    ext = write_ext(home, "ops.py", """
        def register(pi):
            @pi.on("user_bash")
            def remote(event):
                return {"operations": object()}
        """)
    p = spawn("--no-session", "--provider", "faux", "-e", ext)
    r = p.request({"type": "bash", "command": "touch ran-locally"}, timeout=30)
    assert r["success"] is False and "returned 'operations'" in r["error"]
    assert not os.path.exists(os.path.join(home.cwd, "ran-locally"))
