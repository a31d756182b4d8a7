"""pisces as a Harbor agent: the commands Harbor runs in a task's environment, and the trajectory in ATIF.

Harbor (the Terminal-Bench 2.0 harness) runs an *installed agent* in the task's container: it runs an install
script once, then the agent headless with the task's instruction, and reads the trajectory from the agent's log
directory. ``install_script()`` and ``run_command()`` are those two steps for pisces; ``atif_from_session()``
turns a pisces (pi-format) session file into Harbor's Agent Trajectory Interchange Format (ATIF-v1.4), and
``python -m pisces.modes.batch.harbor atif SESSION OUT`` does it from a shell, which is how the run command
leaves ``trajectory.json`` behind.

``PiscesAgent`` (built by ``harbor_agent_class()`` on first access) is the ``BaseInstalledAgent`` subclass, for
``harbor run --agent-import-path pisces.modes.batch.harbor:PiscesAgent``, when the ``harbor`` package is importable
(it needs Python 3.12 and Docker, so it is not exercised on this project's machines: the commands and the
export are tested instead, by running them here).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from datetime import datetime, timezone
from typing import Any

ATIF_VERSION = "ATIF-v1.4"
LOG_DIR = "/logs/agent"


def install_script(spec: str = "pisces-agent") -> str:
    """A POSIX shell script that installs pisces into the environment (Python 3.11+ and pip needed there)."""
    quoted = shlex.quote(spec)
    return "\n".join([
        "#!/bin/sh",
        "set -eu",
        'PY=$(command -v python3 || command -v python || true)',
        'if [ -z "$PY" ]; then echo "pisces needs Python 3.11 or later in the environment" >&2; exit 1; fi',
        '"$PY" -m venv /opt/pisces-venv',
        f"/opt/pisces-venv/bin/pip install --quiet {quoted}",
        "ln -sf /opt/pisces-venv/bin/pisces /usr/local/bin/pisces",
        "pisces --version",
        "",
    ])


def run_command(instruction: str, *, model: str | None = None, provider: str | None = None,
                log_dir: str = LOG_DIR, extra_flags: list[str] | None = None) -> str:
    """The shell command that runs pisces headless on ``instruction`` and leaves, in ``log_dir``, the JSON
    event stream (``pisces.jsonl``), the session file (``sessions/``) and ``trajectory.json`` (ATIF)."""
    flags = ["--mode", "json", "--session-dir", f"{log_dir}/sessions"]
    if provider:
        flags += ["--provider", provider]
    if model:
        flags += ["--model", model]
    flags += list(extra_flags or [])
    argv = " ".join(shlex.quote(f) for f in flags)
    return (f"mkdir -p {shlex.quote(log_dir)}/sessions && "
            f"pisces {argv} {shlex.quote(instruction)} > {shlex.quote(log_dir)}/pisces.jsonl; "
            f"status=$?; "
            f"session=$(ls -t {shlex.quote(log_dir)}/sessions/*.jsonl 2>/dev/null | head -n 1); "
            f'if [ -n "$session" ]; then "$(dirname "$(readlink -f "$(command -v pisces)")")/python" '
            f'-m pisces.modes.batch.harbor atif "$session" {shlex.quote(log_dir)}/trajectory.json; fi; '
            f"exit $status")


def _branch(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries from the root to the session's last entry (pi's tree: each entry names its parent)."""
    by_id = {e["id"]: e for e in entries if isinstance(e.get("id"), str)}
    leaf = next((e for e in reversed(entries) if isinstance(e.get("id"), str)), None)
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    while leaf is not None and leaf["id"] not in seen:
        seen.add(leaf["id"])
        path.append(leaf)
        parent = leaf.get("parentId")
        leaf = by_id.get(parent) if isinstance(parent, str) else None
    return path[::-1]


def _text(content: Any, kind: str = "text") -> str:
    if isinstance(content, str):
        return content if kind == "text" else ""
    key = "thinking" if kind == "thinking" else "text"
    return "".join(b.get(key, "") for b in content or [] if isinstance(b, dict) and b.get("type") == kind)


def _iso(ms: Any, fallback: str | None) -> str | None:
    if isinstance(ms, (int, float)):
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat().replace("+00:00", "Z")
    return fallback


def atif_from_session(path: str, *, agent_version: str | None = None) -> dict[str, Any]:
    """The session at ``path`` as an ATIF trajectory (its current branch, in order)."""
    with open(path, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if not lines or lines[0].get("type") != "session":
        raise ValueError(f"{path} is not a session file (its first line is not a session header)")
    header = lines[0]
    if agent_version is None:
        from pisces import __version__ as agent_version  # noqa: PLC0415 - only the export needs it
    steps: list[dict[str, Any]] = []
    totals = {"prompt": 0, "completion": 0, "cached": 0, "cost": 0.0}
    model_name = None
    pending: dict[str, dict[str, Any]] = {}  # tool call id -> the agent step that made it
    for entry in _branch(lines[1:]):
        if entry.get("type") != "message":
            continue
        message = entry.get("message") or {}
        role = message.get("role")
        when = _iso(message.get("timestamp"), entry.get("timestamp"))
        if role == "user":
            steps.append({"step_id": len(steps) + 1, "timestamp": when, "source": "user",
                          "message": _text(message.get("content"))})
        elif role == "assistant":
            model_name = message.get("model") or model_name
            step: dict[str, Any] = {"step_id": len(steps) + 1, "timestamp": when, "source": "agent",
                                    "model_name": message.get("model"),
                                    "message": _text(message.get("content"))}
            thinking = _text(message.get("content"), "thinking")
            if thinking:
                step["reasoning_content"] = thinking
            calls = [b for b in message.get("content") or [] if isinstance(b, dict) and b.get("type") == "toolCall"]
            if calls:
                step["tool_calls"] = [{"tool_call_id": c["id"], "function_name": c["name"],
                                       "arguments": c.get("arguments") or {}} for c in calls]
                for c in calls:
                    pending[c["id"]] = step
            usage = message.get("usage") or {}
            prompt = int(usage.get("input", 0)) + int(usage.get("cacheRead", 0)) + int(usage.get("cacheWrite", 0))
            cost = float((usage.get("cost") or {}).get("total", 0) or 0)
            step["metrics"] = {"prompt_tokens": prompt, "completion_tokens": int(usage.get("output", 0)),
                               "cached_tokens": int(usage.get("cacheRead", 0)), "cost_usd": cost,
                               "extra": {"cache_creation_input_tokens": int(usage.get("cacheWrite", 0))}}
            if message.get("stopReason") in ("error", "aborted"):
                step["extra"] = {"stopReason": message["stopReason"], "errorMessage": message.get("errorMessage")}
            totals["prompt"] += prompt
            totals["completion"] += int(usage.get("output", 0))
            totals["cached"] += int(usage.get("cacheRead", 0))
            totals["cost"] += cost
            steps.append(step)
        elif role == "toolResult":
            owner = pending.pop(message.get("toolCallId"), None)
            result = {"source_call_id": message.get("toolCallId"), "content": _text(message.get("content"))}
            if owner is not None:
                owner.setdefault("observation", {"results": []})["results"].append(result)
            else:  # a result without its call on this branch: kept as a system observation
                steps.append({"step_id": len(steps) + 1, "timestamp": when, "source": "system", "message": "",
                              "observation": {"results": [{"content": result["content"]}]}})
    for step in steps:  # ATIF leaves out what is unknown rather than writing null
        for key in [k for k, v in step.items() if v is None]:
            del step[key]
    return {
        "schema_version": ATIF_VERSION,
        "session_id": header.get("id"),
        "agent": {"name": "pisces", "version": agent_version, **({"model_name": model_name} if model_name else {})},
        "steps": steps,
        "final_metrics": {"total_prompt_tokens": totals["prompt"], "total_completion_tokens": totals["completion"],
                          "total_cached_tokens": totals["cached"], "total_cost_usd": round(totals["cost"], 8),
                          "total_steps": len(steps)},
        "extra": {"cwd": header.get("cwd")},
    }


def harbor_agent_class() -> Any:
    """pisces as Harbor's ``BaseInstalledAgent`` (needs the ``harbor`` package, Python 3.12+)."""
    try:
        from harbor.agents.installed.base import BaseInstalledAgent, ExecInput  # noqa: PLC0415 - optional
    except ImportError:
        raise RuntimeError("the Harbor adapter needs the harbor package (Python 3.12 or later): pip install harbor")\
            from None

    class PiscesAgent(BaseInstalledAgent):  # type: ignore[misc, valid-type] - harbor is untyped here
        SUPPORTS_ATIF = True

        @staticmethod
        def name() -> str:
            return "pisces"

        @property
        def _install_agent_template_path(self) -> Any:
            import pathlib  # noqa: PLC0415 - inside the optional class

            script = pathlib.Path(self.logs_dir) / "install-pisces.sh"
            script.write_text(install_script(os.environ.get("PISCES_HARBOR_SPEC", "pisces-agent")))
            return script

        def create_run_agent_commands(self, instruction: str) -> list[Any]:
            model = self.model_name.split("/", 1) if self.model_name else None
            provider, model_id = (model[0], model[1]) if model and len(model) == 2 else (None, self.model_name)
            return [ExecInput(command=run_command(instruction, model=model_id, provider=provider))]

    return PiscesAgent


def __getattr__(name: str) -> Any:
    """``pisces.modes.batch.harbor:PiscesAgent``, the import path Harbor's ``--agent-import-path`` takes."""
    if name == "PiscesAgent":
        return harbor_agent_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] != "atif":
        sys.stderr.write("usage: python -m pisces.modes.batch.harbor atif SESSION.jsonl OUT.json\n")
        return 2
    try:
        doc = atif_from_session(argv[1])
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"pisces: {exc}\n")
        return 1
    with open(argv[2], "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
