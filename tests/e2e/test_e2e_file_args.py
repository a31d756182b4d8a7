"""``@file`` arguments in print and json modes, as pi 0.73.1: text files wrapped in ``<file name>`` before the
first message, images attached to it, empty files skipped, a missing file refused before anything runs."""

from __future__ import annotations

import base64
import json
import os
import subprocess

from e2eproc import PISCES

PNG_1PX = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


def run(home, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*PISCES, "--no-session", *args], capture_output=True, text=True, timeout=60,
                          cwd=home.cwd, env=home.env(), stdin=subprocess.DEVNULL)


def test_file_arguments_in_json_mode(home):
    with open(os.path.join(home.cwd, "notes.txt"), "w") as f:
        f.write("alpha notes\n")
    with open(os.path.join(home.cwd, "dot.png"), "wb") as f:
        f.write(PNG_1PX)
    open(os.path.join(home.cwd, "empty.txt"), "w").close()
    script = home.faux_script([{"text": "first answer"}, {"text": "second answer"}])
    r = run(home, "--faux-script", script, "--mode", "json", "@notes.txt", "@empty.txt", "@dot.png",
            "What is in these?", "And then?")
    assert r.returncode == 0, r.stderr
    users = [json.loads(line)["message"] for line in r.stdout.splitlines()
             if json.loads(line).get("type") == "message_end" and json.loads(line)["message"]["role"] == "user"]
    notes, png = os.path.join(home.cwd, "notes.txt"), os.path.join(home.cwd, "dot.png")
    assert users[0]["content"] == [
        {"type": "text", "text": f'<file name="{notes}">\nalpha notes\n\n</file>\n<file name="{png}"></file>\n'
                                 "What is in these?"},
        {"type": "image", "data": base64.b64encode(PNG_1PX).decode(), "mimeType": "image/png"}]
    assert users[1]["content"] == [{"type": "text", "text": "And then?"}]  # only the first message gets them


def test_file_arguments_in_print_mode_and_a_missing_file(home):
    with open(os.path.join(home.cwd, "q.txt"), "w") as f:
        f.write("question")
    r = run(home, "--faux-script", home.faux_script([{"text": "printed answer"}]), "-p", "@q.txt")
    assert r.returncode == 0 and r.stdout == "printed answer\n", r.stderr
    missing = run(home, "--faux-script", home.faux_script([{"text": "never"}], "b.json"), "-p", "@nope.txt", "hi")
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr.strip() == f"Error: File not found: {os.path.join(home.cwd, 'nope.txt')}"
