"""Command names: the canonical table and every older or alternative name the seeds use.

A response echoes the name the client sent; the handler is found through the canonical name. An alias
answers in the shape of the name it stands for; a name that later pi versions gave their own shape
(``get_tree``, ``set_label``) has its own handler instead.
"""

from __future__ import annotations

ALIASES: dict[str, str] = {
    "queue_message": "steer",  # seed 003
    "set_queue_mode": "set_steering_mode",  # seed 003
    "branch": "fork",  # seeds 000, 003
    "get_branch_messages": "get_fork_messages",  # seeds 000, 003
    "get_sessions": "list_sessions",
    "get_available_sessions": "list_sessions",
    "get_available_commands": "get_commands",  # oh-my-pi
    "reset": "new_session",  # seed 004 era
    "set_client_capabilities": "negotiate_protocol",  # the same command under a second, descriptive name
}


def canonical_command(name: str) -> str:
    return ALIASES.get(name, name)
