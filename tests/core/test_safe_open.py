"""Every file pisces opens because a repository or a client names it goes through pisces.core.safe_open:
FIFOs, devices and links to devices are refused without blocking, sizes are bounded, session files are
private. Scenarios that hang or exhaust memory when broken run in a bounded child (tests/bounded.py)."""

from __future__ import annotations

import os
import stat

import pytest

from bounded import run_python
from pisces.core.safe_open import FileTooLargeError, NotRegularFileError, read_bytes, read_text, write_atomic

HOSTILE = ["fifo", "link-to-zero", "link-to-urandom", "link-to-stdin", "huge"]


def plant(path, kind: str) -> None:
    """Put a hostile thing at ``path``."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind.startswith("link-to-"):
        os.symlink(f"/dev/{kind[len('link-to-'):]}", path)
    elif kind == "huge":
        with open(path, "wb") as f:
            f.truncate(2 << 30)
    else:
        raise ValueError(kind)


# ---------------------------------------------------------------------------------------------
# The module itself
# ---------------------------------------------------------------------------------------------
def test_refusals_name_the_kind(tmp_path):
    os.mkfifo(tmp_path / "p")
    with pytest.raises(NotRegularFileError, match=r"^.*/p is a FIFO \(named pipe\), not a regular file$"):
        read_bytes(str(tmp_path / "p"), 10)
    with pytest.raises(NotRegularFileError, match=r"^/dev/zero is a character device, not a regular file$"):
        read_text("/dev/zero", 10)
    (tmp_path / "big").write_bytes(b"x" * 11)
    with pytest.raises(FileTooLargeError, match=r"is larger than 10 bytes"):
        read_bytes(str(tmp_path / "big"), 10)
    assert read_bytes(str(tmp_path / "big"), 11) == b"x" * 11
    with pytest.raises(FileNotFoundError):
        read_bytes(str(tmp_path / "missing"), 10)


def test_a_file_that_grows_past_its_size_is_still_bounded():
    # /proc files report size 0 and can be longer than that
    data = read_bytes("/proc/self/status", 1 << 20)
    assert data.startswith(b"Name:")
    with pytest.raises(FileTooLargeError):
        read_bytes("/proc/self/status", 16)


def test_write_atomic_keeps_mode_and_creates_with_the_umask_or_the_given_mode(tmp_path):
    p = tmp_path / "f"
    write_atomic(str(p), b"one")
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o666 & ~_umask()
    os.chmod(p, 0o751)
    write_atomic(str(p), b"two")
    assert p.read_bytes() == b"two" and stat.S_IMODE(os.stat(p).st_mode) == 0o751
    write_atomic(str(tmp_path / "g"), b"x", new_mode=0o600)
    assert stat.S_IMODE(os.stat(tmp_path / "g").st_mode) == 0o600
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotRegularFileError):
        write_atomic(str(tmp_path / "fifo"), b"x")
    assert sorted(os.listdir(tmp_path)) == ["f", "fifo", "g"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# ---------------------------------------------------------------------------------------------
# Configuration a repository ships, and the agent dir's files
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", HOSTILE)
def test_hostile_project_configuration_never_blocks_or_floods(tmp_path, kind):
    """A checkout whose .pisces/settings.json, prompts/x.md, SYSTEM.md, APPEND_SYSTEM.md and AGENTS.md are
    FIFOs, links to devices or 2 GiB sparse files: settings, prompt templates and the system prompt are
    built at once, each file refused with a warning."""
    project = tmp_path / "repo"
    for rel in (".pisces/settings.json", ".pisces/prompts/x.md", ".pisces/SYSTEM.md", ".pisces/APPEND_SYSTEM.md",
                "AGENTS.md"):
        plant(str(project / rel), kind)
    out = run_python(f"""
        from pisces.core.config.settings import Settings
        from pisces.core.resources.templates import load_templates
        from pisces.core.resources.system_prompt import build_system_prompt
        cwd = {str(project)!r}
        s = Settings({str(tmp_path / "agent")!r}, cwd)
        templates = load_templates(cwd)
        prompt = build_system_prompt(cwd, agent_dir={str(tmp_path / "agent")!r})
        report({{"errors": s.load_errors, "templates": sorted(templates), "base": prompt.startswith("You are pisces"),
                "context": "# Project Context" in prompt}})
    """, stdin=None, memory=768 << 20)
    r = out.check()
    assert r["templates"] == [] and r["base"] is True and r["context"] is False
    assert len(r["errors"]) == 1 and "settings.json" in r["errors"][0]
    reason = "larger than" if kind == "huge" else "not a regular file"
    assert reason in r["errors"][0]
    for name in ("settings.json", "prompts/x.md", "SYSTEM.md", "APPEND_SYSTEM.md", "AGENTS.md"):
        assert name in out.stderr, out.stderr


@pytest.mark.parametrize("kind", HOSTILE)
def test_hostile_models_and_auth_json_are_refused(tmp_path, kind):
    agent = tmp_path / "agent"
    plant(str(agent / "models.json"), kind)
    plant(str(agent / "auth.json"), kind)
    out = run_python(f"""
        os.environ["PISCES_CODING_AGENT_DIR"] = {str(agent)!r}
        from pisces.core.config.models_registry import ModelRegistry
        reg = ModelRegistry({str(agent)!r})
        report({{"models": reg.load_error, "auth": reg.auth.load_error}})
    """, stdin=None, memory=768 << 20)
    r = out.check()
    reason = "larger than" if kind == "huge" else "not a regular file"
    assert r["models"].startswith(f"Failed to load {agent}/models.json: ") and reason in r["models"]
    assert "auth.json" in r["auth"] and reason in r["auth"]


def test_enabled_models_globs_are_linear(tmp_path):
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "settings.json").write_text('{"enabledModels": ["*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", "[z-a]*"]}')
    out = run_python(f"""
        os.environ["PISCES_CODING_AGENT_DIR"] = {str(agent)!r}
        os.environ["ANTHROPIC_API_KEY"] = "k"
        from pisces.core.config.models_registry import ModelRegistry
        from pisces.core.config.settings import Settings
        reg = ModelRegistry({str(agent)!r})
        scoped = reg.resolve_scope(Settings({str(agent)!r}, {str(tmp_path)!r}).enabled_models)
        report({{"scoped": len(scoped), "warnings": reg.warnings}})
    """)
    r = out.check()
    assert r["scoped"] == 0
    assert 'No models match pattern "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b"' in r["warnings"]


# ---------------------------------------------------------------------------------------------
# Session files
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["fifo", "link-to-zero", "link-to-stdin", "dir"])
def test_a_session_path_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    path = str(tmp_path / "s.jsonl")
    if kind == "dir":
        os.mkdir(path)
    else:
        plant(path, kind)
    out = run_python(f"""
        from pisces.core.store import SessionManager, load_session_file
        errors = []
        for attempt in (lambda: load_session_file({path!r}), lambda: SessionManager.open({path!r})):
            try:
                attempt()
                errors.append(None)
            except Exception as exc:
                errors.append([type(exc).__name__, str(exc)])
        report(errors)
    """, stdin=None, memory=768 << 20)
    (load_name, load_text), (open_name, open_text) = out.check()
    kind = "a directory" if kind == "dir" else "a FIFO (named pipe)" if kind == "fifo" else None
    assert load_name == "NotRegularFileError" and load_text.startswith(f"{path} is a")
    assert open_name == "SessionFileError" and open_text.startswith(f"Cannot use {path} as the session file: it is a")
    if kind:
        assert load_text.startswith(f"{path} is {kind}") and open_text.endswith(f"it is {kind}" + (
            "" if kind == "a directory" else ", not a regular file"))


def test_a_huge_session_file_is_refused_without_loading_it(tmp_path):
    plant(str(tmp_path / "s.jsonl"), "huge")
    out = run_python(f"""
        from pisces.core.store import SessionFileError, SessionManager
        try:
            SessionManager.open({str(tmp_path / "s.jsonl")!r})
            report("loaded")
        except SessionFileError as exc:
            report(str(exc))
    """, memory=768 << 20)
    # SESSION_MAX_BYTES is 1 GiB: the 2 GiB file is refused by its size, before a byte is read
    assert out.check().endswith("it is larger than 1 GiB, the most pisces reads from such a file")


def test_listing_and_continue_skip_hostile_files(tmp_path):
    d = tmp_path / "sessions"
    for i, kind in enumerate(["fifo", "link-to-zero", "link-to-stdin", "huge"]):
        plant(str(d / f"2026-01-0{i + 1}_x{i}.jsonl"), kind)
    out = run_python(f"""
        from pisces.core.store import SessionManager, list_sessions
        from pisces.ai.types import AssistantMessage, TextContent, UserMessage
        sm = SessionManager.create({str(tmp_path)!r}, {str(d)!r})
        sm.append_message(UserMessage(content=[TextContent(text="hi")]))
        sm.append_message(AssistantMessage(content=[TextContent(text="yo")], api="faux", provider="faux", model="faux"))
        listed = [os.path.basename(s.path) for s in list_sessions({str(d)!r})]
        cont = SessionManager.continue_recent({str(tmp_path)!r}, {str(d)!r})
        report({{"listed": listed, "mine": os.path.basename(sm.get_session_file()),
                "continued": os.path.basename(cont.get_session_file())}})
    """, stdin=None, memory=768 << 20)
    r = out.check()
    assert r["listed"] == [r["mine"]] and r["continued"] == r["mine"]


def test_session_files_are_created_private(tmp_path):
    from pisces.ai.types import AssistantMessage, TextContent, UserMessage
    from pisces.core.store import SessionManager

    d = tmp_path / "sessions" / "--cwd--"
    sm = SessionManager.create(str(tmp_path), str(d))
    sm.append_message(UserMessage(content=[TextContent(text="hi")]))
    sm.append_message(AssistantMessage(content=[TextContent(text="yo")], api="faux", provider="faux", model="faux"))
    path = sm.get_session_file()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    leaf = sm.get_leaf_id()
    branched = sm.create_branched_session(leaf)  # written whole by the atomic writer
    assert branched and stat.S_IMODE(os.stat(branched).st_mode) == 0o600


def test_appending_never_writes_into_a_fifo_swapped_in_for_the_session(tmp_path):
    """The session's file replaced by a FIFO while pisces runs: the append is refused (a warning, the entries
    stay in memory), nothing blocks, nothing is written into the pipe."""
    out = run_python(f"""
        from pisces.core.store import SessionManager
        from pisces.ai.types import AssistantMessage, TextContent, UserMessage
        sm = SessionManager.create({str(tmp_path)!r}, {str(tmp_path / "s")!r})
        sm.append_message(UserMessage(content=[TextContent(text="hi")]))
        sm.append_message(AssistantMessage(content=[TextContent(text="yo")], api="faux", provider="faux", model="faux"))
        path = sm.get_session_file()
        sm.close()
        os.unlink(path)
        os.mkfifo(path)
        sm.append_message(UserMessage(content=[TextContent(text="again")]))
        report({{"error": str(sm.last_write_error), "entries": len(sm.get_entries())}})
    """)
    r = out.check()
    assert "not a regular file" in r["error"] and r["entries"] == 3
