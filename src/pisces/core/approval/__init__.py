"""Tool approval (docs/approval.md): a pure policy of tiers, modes and rules decides allow, deny or ask for
each tool call; on ask the session's approver (the mode's: RPC frames, ACP ``session/request_permission``, or
nobody in print mode) asks a person, with a timeout and an abort, and the answer ends the question exactly once.

* ``types``: ``Decision``, ``ApprovalRequest``, ``ApprovalAnswer`` and the sentences of each ending;
* ``policy``: tiers, ``ApprovalPolicy.decide``, the request an approver shows (no I/O);
* ``rules``: rule checking, ``*`` globs, the shell-aware matching of commands and paths (no I/O);
* ``shell``: segments, control characters and known-dangerous commands (no I/O);
* ``redact``: redaction and the bounds of what a request shows (no I/O);
* ``session_gate``: ``SessionApproval``, the policy on a session's tool-call gate, its grants, pending
  requests, mode and rule commands; ``UIApprover``, the default approver.

Importing this package is cheap: the patterns compile on the first command that needs them.
"""

from __future__ import annotations

from pisces.core.approval.session_gate import SessionApproval, UIApprover, attach
from pisces.core.approval.types import MODES, SCOPES, TIERS, ApprovalAnswer, ApprovalRequest, Decision

__all__ = ["ApprovalAnswer", "ApprovalRequest", "Decision", "MODES", "SCOPES", "SessionApproval", "TIERS",
           "UIApprover", "attach"]
