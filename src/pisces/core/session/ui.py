"""The session UI: how the session and its collaborators ask a person (or a host) something.

``SessionUI`` is the interface, and on its own it is the "no UI" answer: ``has_ui`` is false and every dialog
returns its default at once (``select``/``input``/``editor`` -> None, ``confirm`` -> False). Print and json
modes use it (``NoUI``). A mode with a person or a host behind it (RPC, later the web host) subclasses it and
overrides ``_dialog``, ``_fire`` and ``request``.

Every dialog takes ``timeout_ms`` and an abort ``signal`` (``pisces.ai.abort.AbortSignal``) and resolves exactly
once, to the default when the time runs out or the signal fires. pi's forms work too: ``timeout=``, or an
options dict after the positional arguments (``confirm(title, message, {"timeout": 5000})``).
"""

from __future__ import annotations

from typing import Any

CUSTOM_UNSUPPORTED = ("ctx.ui.custom() is not supported in pisces: there is no terminal to draw a component on. "
                      "Use select, confirm, input or editor instead.")


class UnsupportedUIError(RuntimeError):
    """A UI call that cannot work here (``custom()``): raised at once instead of hanging."""


def _timeout(timeout_ms: Any, timeout: Any, opts: Any = None) -> int | None:
    value = timeout_ms if timeout_ms is not None else timeout
    if value is None and isinstance(opts, dict):  # pi's options object: {"timeout": ms, "signal": ...}
        value = opts.get("timeout")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return int(value)


def _signal(signal: Any, opts: Any) -> Any:
    return signal if signal is not None or not isinstance(opts, dict) else opts.get("signal")


def _text(answer: dict[str, Any] | None) -> str | None:
    """The ``value`` of a dialog's answer frame; None when there is none (no answer, cancelled, not a string)."""
    value = answer.get("value") if answer and not answer.get("cancelled") else None
    return value if isinstance(value, str) else None


class SessionUI:
    """No UI: dialogs answer their defaults at once, fire-and-forget calls do nothing."""

    has_ui = False

    # -- dialogs ----------------------------------------------------------------------------------
    async def select(self, title: str, options: list[str], opts: Any = None, *, timeout_ms: int | None = None,
                     signal: Any = None, timeout: int | None = None) -> str | None:
        fields = {"title": title, "options": [str(o) for o in options]}
        answer = await self._dialog("select", fields, _timeout(timeout_ms, timeout, opts), _signal(signal, opts))
        return _text(answer)

    async def confirm(self, title: str, message: str = "", opts: Any = None, *, timeout_ms: int | None = None,
                      signal: Any = None, timeout: int | None = None) -> bool:
        answer = await self._dialog("confirm", {"title": title, "message": message},
                                    _timeout(timeout_ms, timeout, opts), _signal(signal, opts))
        return bool(answer and not answer.get("cancelled") and answer.get("confirmed") is True)

    async def input(self, title: str, placeholder: str | None = None, opts: Any = None, *,
                    timeout_ms: int | None = None, signal: Any = None, timeout: int | None = None) -> str | None:
        answer = await self._dialog("input", {"title": title, "placeholder": placeholder},
                                    _timeout(timeout_ms, timeout, opts), _signal(signal, opts))
        return _text(answer)

    async def editor(self, title: str, prefill: str | None = None, opts: Any = None, *,
                     timeout_ms: int | None = None, signal: Any = None, timeout: int | None = None) -> str | None:
        answer = await self._dialog("editor", {"title": title, "prefill": prefill},
                                    _timeout(timeout_ms, timeout, opts), _signal(signal, opts))
        return _text(answer)

    async def request(self, frame: dict[str, Any], *, timeout_ms: int | None = None, signal: Any = None
                      ) -> dict[str, Any]:
        """Send a typed request frame and wait for its answer frame. Without a UI, or when nothing answers in
        time, the result is ``{"cancelled": True, ...}`` with ``timedOut``, ``aborted`` or ``closed`` (or
        ``noUI``) saying why."""
        return {"cancelled": True, "noUI": True}

    async def _dialog(self, method: str, fields: dict[str, Any], timeout_ms: int | None, signal: Any
                      ) -> dict[str, Any] | None:
        """The client's answer frame, or None for "no answer" (the caller returns the default)."""
        return None

    # -- fire and forget ----------------------------------------------------------------------------
    def notify(self, message: str, notify_type: str | None = None) -> None:
        self._fire("notify", {"message": message, "notifyType": notify_type})

    def set_status(self, key: str, text: str | None = None) -> None:
        self._fire("setStatus", {"statusKey": key, "statusText": text})

    def set_widget(self, key: str, lines: Any = None, placement: Any = None) -> None:
        if isinstance(placement, dict):  # pi's options object: {"placement": ...}
            placement = placement.get("placement")
        if lines is not None and not isinstance(lines, (list, tuple)):
            return  # a component factory: nothing to draw it with
        self._fire("setWidget", {"widgetKey": key, "widgetLines": None if lines is None else [str(x) for x in lines],
                                 "widgetPlacement": placement})

    def set_title(self, title: str) -> None:
        self._fire("setTitle", {"title": title})

    def set_editor_text(self, text: str) -> None:
        self._fire("set_editor_text", {"text": text})

    def paste_to_editor(self, text: str) -> None:
        self.set_editor_text(text)

    def _fire(self, method: str, fields: dict[str, Any]) -> None:
        pass

    # -- what a headless UI cannot do -------------------------------------------------------------
    async def custom(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedUIError(CUSTOM_UNSUPPORTED)

    def get_editor_text(self) -> str:
        return ""

    def set_working_message(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set_footer(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set_header(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set_editor_component(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set_theme(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {"success": False, "error": "Theme switching not supported in RPC mode" if self.has_ui
                else "UI not available"}

    def get_tools_expanded(self) -> bool:
        return False


class NoUI(SessionUI):
    """Print and json modes: ``has_ui`` false, dialogs return their defaults at once."""

