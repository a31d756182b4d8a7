"""The workloads, built once per run under one scratch directory and shared by the in-process and the RPC
figures. The builders are the standalone scripts' own (bench_sessions, bench_export, bench_grep_find).

Every session file is pi's JSONL format (v3) written by pisces' SessionManager, which pi 0.73.1 opens too;
its ``cwd`` is :attr:`Workloads.project`, a directory that exists (pi refuses a session whose cwd is gone).
"""

from __future__ import annotations

import os
import random
from functools import cached_property
from pathlib import Path

from benchmarks import bench_export, bench_grep_find, bench_sessions
from benchmarks._common import Sizes


class Workloads:
    def __init__(self, root: Path, sizes: Sizes, log=lambda msg: None) -> None:
        self.root = Path(root)
        self.sizes = sizes
        self.log = log
        self.project = self.root / "project"
        self.project.mkdir(parents=True, exist_ok=True)

    @cached_property
    def many_sessions_dir(self) -> str:
        """``session_files`` sessions of 2 to 15 turns each (bench_sessions' builder)."""
        d = str(self.root / "many-sessions")
        rng = random.Random(42)
        for _ in range(self.sizes.session_files):
            bench_sessions._write_session(d, rng.randint(2, 15), rng, cwd=str(self.project))
        self.log(f"workload: {self.sizes.session_files} session files in {d}")
        return d

    @cached_property
    def long_session(self) -> tuple[str, int]:
        """(path, entries) of one session of ``session_entries`` entries: a model change, a thinking level
        change, turns of four messages (prompt, tool call, tool result, answer), then a name entry or two to
        make the count exact."""
        from pisces.core.store import SessionManager

        rng = random.Random(43)
        turns = max(1, (self.sizes.session_entries - 2) // 4)
        path = bench_sessions._write_session(str(self.root / "long-session"), turns, rng, cwd=str(self.project))
        n = turns * 4 + 2
        if n < self.sizes.session_entries:  # make up the count exactly with small entries
            sm = SessionManager.open(path)
            for i in range(self.sizes.session_entries - n):
                if i % 2 == 0:
                    sm.append_session_info(f"benchmark session {i}")
                else:
                    sm.append_thinking_level_change("low")
            sm.close()
            n = self.sizes.session_entries
        self.log(f"workload: {n}-entry session, {os.path.getsize(path) / 1e6:.1f} MB")
        return path, n

    @cached_property
    def export_session(self) -> str:
        """A session of ``export_messages`` messages with thinking, tool calls and markdown (bench_export)."""
        sm = bench_export.build_session(str(self.project), str(self.root / "export-session"),
                                        self.sizes.export_messages, random.Random(7))
        path = sm.get_session_file()
        sm.close()
        assert path
        self.log(f"workload: {self.sizes.export_messages}-message session, {os.path.getsize(path) / 1e6:.1f} MB")
        return path

    @cached_property
    def compaction_session(self) -> tuple[str, int]:
        """(path, estimated tokens) of a session grown turn by turn (bench_sessions' turns) until pi's
        chars/4 estimate of its messages reaches ``compaction_tokens``. Each reply's usage says the context
        so far, as a real provider's would, so the session reports about that many tokens too."""
        from pisces.ai.types import AssistantMessage, Usage
        from pisces.core.session.views import estimate_tokens
        from pisces.core.store import SessionManager

        rng = random.Random(44)
        sm = SessionManager.create(str(self.project), str(self.root / "compaction-session"))
        sm.append_model_change("p", "m")
        sm.append_thinking_level_change("off")
        tokens = 0
        i = 0
        while tokens < self.sizes.compaction_tokens:
            for message in bench_sessions._turn(rng, i):
                tokens += estimate_tokens(message)
                if isinstance(message, AssistantMessage):
                    out = estimate_tokens(message)
                    message.usage = Usage(input=tokens - out, output=out, totalTokens=tokens)
                sm.append_message(message)
            i += 1
        path = sm.get_session_file()
        sm.close()
        assert path
        self.log(f"workload: {tokens}-token session ({len(sm.get_entries())} entries, "
                 f"{os.path.getsize(path) / 1e6:.1f} MB)")
        return path, tokens

    @cached_property
    def grep_tree(self) -> str:
        """``grep_files`` files in a git-like tree with a .gitignore (bench_grep_find's builder)."""
        root = str(self.root / "tree")
        bench_grep_find.build_tree(root, self.sizes.grep_files)
        self.log(f"workload: {self.sizes.grep_files}-file tree in {root}")
        return root
