"""What the task tool needs from the session that owns it, and nothing more: ``TaskHost``.

A session's host is built once (``TaskHost.for_session``); a subagent that may itself delegate gets a child host
(``child``) that shares the root's event sink, hooks and artifacts directory, so nested subagents show on the
RPC stream too (their ids carry the parent's: ``0-Outer.0-Inner``).
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from pisces.core.task.agents import is_project_trusted
from pisces.core.task.hooks import SubagentHooks


class IdAllocator:
    """Unique task ids for the life of a session: ``<n>-<id>`` (``<parent>.<n>-<id>`` for nested tasks). The
    counter resumes after the highest number found among ``<n>-*.md`` outputs in the artifacts directory."""

    def __init__(self, prefix: str | None = None) -> None:
        self.prefix = prefix
        self._next: dict[str, int] = {}

    def allocate(self, ids: list[str], artifacts_dir: str | None) -> list[str]:
        """Blocking on first use of a directory (it lists it): call it from a worker thread. ``None``: the
        session is in memory (its artifacts go to a new temporary directory each call), one counter for all."""
        key = artifacts_dir or ""
        if key not in self._next:
            self._next[key] = self._scan(artifacts_dir) if artifacts_dir else 0
        lead = f"{self.prefix}." if self.prefix else ""
        out = []
        for raw in ids:
            out.append(f"{lead}{self._next[key]}-{raw}")
            self._next[key] += 1
        return out

    def _scan(self, directory: str) -> int:
        try:
            names = os.listdir(directory)
        except OSError:
            return 0
        lead = re.escape(f"{self.prefix}.") if self.prefix else ""
        pattern = re.compile(rf"^{lead}(\d+)-.*\.md$")
        numbers = [int(m.group(1)) for m in map(pattern.match, names) if m]
        return max(numbers) + 1 if numbers else 0


@dataclass
class TaskHost:
    cwd: str  # where the owning session works (a worktree, for a subagent)
    project_cwd: str  # the user's project: agent discovery and trust are decided there
    agent_dir: str
    settings: Any  # pisces.core.config.settings.Settings
    registry: Any  # pisces.core.config.models_registry.ModelRegistry
    get_model: Callable[[], Any]
    get_thinking_level: Callable[[], str]
    get_session_file: Callable[[], str | None]
    emit: Callable[[Any], None]
    hooks: SubagentHooks
    project_trusted: Callable[[], bool]
    depth: int = 0  # 0: the main session
    spawns: str | list[str] = "*"  # which agents this session may start ("*": any)
    artifacts_dir: str | None = None  # fixed for subagents (their parent's); None: from the session file
    allocator: IdAllocator = field(default_factory=IdAllocator)
    backends: Any = None  # the session's file system and shell (ACP: the client's); None: the local ones
    approval: Any = None  # the session's approval gate (pisces.core.approval), which subagents' tool calls pass too
    # builds a subagent's session (AgentSession's keyword arguments): the owning session's own class, so that the
    # task package never imports the session package that imports it
    new_session: Callable[..., Any] | None = None
    # the session's OS sandbox (pisces.core.sandbox.launch.Sandbox); subagents and verification use its child(),
    # confined to their own workspace by default
    sandbox: Any = None

    @classmethod
    def for_session(cls, session: Any, agent_dir: str, backends: Any = None) -> "TaskHost":
        if getattr(session, "subagents", None) is None:
            session.subagents = SubagentHooks()
        cwd = session.cwd

        def project_trusted() -> bool:
            """The session's own decision (it follows ``trust_project`` and ``--approve``)."""
            decided = getattr(session.settings, "project_trusted", None)
            if isinstance(decided, bool):
                return decided

            return is_project_trusted(cwd, agent_dir)

        return cls(cwd=cwd, project_cwd=cwd, agent_dir=agent_dir, settings=session.settings,
                   registry=session.registry, get_model=lambda: session.model,
                   get_thinking_level=lambda: session.agent.thinking_level,
                   get_session_file=session.store.get_session_file, emit=session.emit, hooks=session.subagents,
                   project_trusted=project_trusted, backends=backends, approval=getattr(session, "approval", None),
                   new_session=type(session), sandbox=getattr(session, "sandbox", None))

    def child(self, *, cwd: str, settings: Any, get_model: Callable[[], Any], get_thinking_level: Callable[[], str],
              spawns: str | list[str], task_id: str, artifacts_dir: str, backends: Any) -> "TaskHost":
        return TaskHost(cwd=cwd, project_cwd=self.project_cwd, agent_dir=self.agent_dir, settings=settings,
                        registry=self.registry, get_model=get_model, get_thinking_level=get_thinking_level,
                        get_session_file=lambda: None, emit=self.emit, hooks=self.hooks,
                        project_trusted=self.project_trusted, depth=self.depth + 1, spawns=spawns,
                        artifacts_dir=artifacts_dir, allocator=IdAllocator(prefix=task_id), backends=backends,
                        approval=self.approval, new_session=self.new_session, sandbox=self.sandbox)

    def resolve_artifacts_dir(self) -> tuple[str, bool]:
        """(directory, is_temporary). A persisted session keeps its artifacts next to its file
        (``<session>.jsonl`` -> ``<session>/``); an in-memory one gets a temporary directory."""
        if self.artifacts_dir:
            return self.artifacts_dir, False
        session_file = self.get_session_file()
        if session_file:
            base = session_file[:-6] if session_file.endswith(".jsonl") else session_file + ".artifacts"
            return base, False
        return os.path.join(tempfile.gettempdir(), f"pisces-task-{uuid.uuid4().hex[:12]}"), True

    def may_spawn(self, agent: str) -> bool:
        if self.spawns == "*":
            return True
        return agent in (self.spawns or [])

    def spawns_text(self) -> str:
        if self.spawns == "*":
            return "*"
        return ", ".join(self.spawns) if self.spawns else "none (spawns disabled for this agent)"
