"""The session actions behind ``pi.*`` once an extension runtime is bound (see api.ExtensionAPI)."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from pisces.ai.types import ImageContent, TextContent
from pisces.core.extensions.api import pick
from pisces.core.extensions.tools import to_content
from pisces.core.store.messages import CustomMessage
from pisces.core.tools.groups import tool_source_info


def custom_message(message: Any) -> Any:
    """A ``{custom_type, content, display, details}`` dict (pi's camelCase keys too) as a custom message."""

    if isinstance(message, CustomMessage):
        return message
    custom_type = pick(message, "customType", "custom_type")
    if not isinstance(custom_type, str) or not custom_type:
        raise ValueError("a custom message needs a 'custom_type' (a string)")
    content = pick(message, "content", default="")
    if not isinstance(content, str):
        content = to_content(content)
    details = pick(message, "details")
    msg = CustomMessage(customType=custom_type, content=content, display=bool(pick(message, "display",
                                                                                  default=True)))
    if details is not None:
        msg.details = details
    return msg


class Actions:
    def __init__(self, host: Any) -> None:
        self.host = host

    @property
    def session(self) -> Any:
        return self.host.session

    # -- tools, providers -----------------------------------------------------------------------------
    def refresh_tools(self) -> None:
        self.host.refresh_tools()

    def register_provider(self, name: str, config: dict[str, Any]) -> None:
        self.session.registry.register_provider(name, config)

    def unregister_provider(self, name: str) -> None:
        self.session.registry.unregister_provider(name)

    # -- messages -------------------------------------------------------------------------------------------
    def send_message(self, ext: Any, message: Any, trigger_turn: bool, deliver_as: str | None) -> None:
        msg = custom_message(message)
        self.host.spawn(self.session.send_custom_message(msg, trigger_turn=trigger_turn, deliver_as=deliver_as),
                        "send_message")

    def send_user_message(self, ext: Any, content: Any, deliver_as: str | None) -> None:
        if isinstance(content, str):
            text, images = content, None
        else:
            blocks = to_content(content)

            text = "\n".join(b.text for b in blocks if isinstance(b, TextContent))
            images = [b for b in blocks if isinstance(b, ImageContent)] or None
        self.host.spawn(self.session.prompt(text, images=images, streaming_behavior=deliver_as, source="extension",
                                            expand=False), "send_user_message")

    def append_entry(self, custom_type: str, data: Any = None) -> str:
        return self.session.store.append_custom_entry(custom_type, UNSET if data is None else data)

    # -- session metadata -----------------------------------------------------------------------------------
    def set_session_name(self, name: str) -> None:
        self.session.set_session_name(name)

    def get_session_name(self) -> str | None:
        return self.session.store.get_session_name()

    def set_label(self, entry_id: str, label: str | None) -> None:
        self.session.set_entry_label(entry_id, label)

    # -- tools, commands, model -----------------------------------------------------------------------------
    def get_active_tools(self) -> list[str]:
        return [t.name for t in self.session.agent.tools]

    def get_all_tools(self) -> list[dict[str, Any]]:
        return [{"name": t.name, "description": t.description, "parameters": t.parameters,
                 "sourceInfo": tool_source_info(self.session, t)} for t in self.session.all_tools.values()]

    def set_active_tools(self, names: list[str]) -> None:
        self.session.set_active_tools(names)

    def get_commands(self) -> list[dict[str, Any]]:
        return self.session.commands()

    async def set_model(self, model: Any) -> bool:
        session = self.session
        if not session.registry.has_auth(model):
            return False
        session.set_model(model)
        return True

    def get_thinking_level(self) -> str:
        return self.session.agent.thinking_level

    def set_thinking_level(self, level: str) -> None:
        self.session.set_thinking_level(level)
