"""Which MCP servers a session should start, read from the files people already have. Stdlib only.

Files, later ones winning for a server of the same name:

1. ``<agentDir>/mcp.json`` (the user's; ``~/.pisces/agent/mcp.json``)
2. ``<project>/.mcp.json`` (Claude Code's portable project file)
3. ``<project>/.pisces/mcp.json`` (the project's pisces file)

Each holds ``{"mcpServers": {name: server}, "disabledServers": [names]}``. A server is stdio (``command``,
``args``, ``env``, ``cwd``) or remote (``url``, ``headers``, ``type: "http"`` (Streamable HTTP, the default for a
url) or ``"sse"``), with ``enabled``, ``timeout`` (ms to connect and initialize), ``toolTimeout`` (ms a call may
take), ``includeTools``/``excludeTools`` (``*`` globs over the server's own tool names), ``approvalTier``
(``read|write|exec``, default ``exec``) and ``alwaysLoad`` (never deferred behind the search tool).

``${VAR}`` (and ``${VAR:-default}``) in ``command``, ``args``, ``env``, ``cwd``, ``url`` and ``headers`` is
replaced from the environment when the server starts; the files are never written, so a secret stays a
reference. A server defined by a project file starts only when the project is trusted
(:func:`pisces.core.config.trust.is_project_trusted`): a stdio command is code the repository chose.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from pisces.core.safe_open import read_bytes

__all__ = ["ServerConfig", "McpConfig", "config_files", "load_config", "expand", "ConfigError", "untrusted_message"]

_MAX_FILE = 1 << 20
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
DEFAULT_TIMEOUT_MS = 30_000
DEFAULT_TOOL_TIMEOUT_MS = 600_000
_KNOWN = {"type", "command", "args", "env", "cwd", "url", "headers", "enabled", "timeout", "toolTimeout",
          "includeTools", "excludeTools", "approvalTier", "alwaysLoad", "description", "$schema", "oauth"}


class ConfigError(ValueError):
    """A server's configuration cannot be used; the text says which field and why."""


@dataclass
class ServerConfig:
    name: str
    transport: str  # "stdio" | "http" | "sse"
    source: str  # the file it came from
    scope: str  # "user" | "project"
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    enabled: bool = True
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    tool_timeout_ms: int = DEFAULT_TOOL_TIMEOUT_MS
    include_tools: list[str] | None = None
    exclude_tools: list[str] = field(default_factory=list)
    approval_tier: str = "exec"
    always_load: bool = False
    oauth: bool | None = None  # a remote server: False never uses OAuth (default: unless headers authorize)

    def public(self) -> dict[str, Any]:
        """What status reports show: the configuration as written (``${VAR}`` unexpanded, so no secret)."""
        out: dict[str, Any] = {"name": self.name, "type": self.transport, "scope": self.scope, "source": self.source}
        if self.transport == "stdio":
            out.update(command=self.command, args=list(self.args))
        else:
            out["url"] = self.url
        return out


@dataclass
class McpConfig:
    servers: dict[str, ServerConfig] = field(default_factory=dict)
    disabled: set[str] = field(default_factory=set)
    untrusted: list[ServerConfig] = field(default_factory=list)  # project servers not started: no trust
    errors: list[str] = field(default_factory=list)  # bad files or entries, one sentence each
    defer_threshold_tokens: int = 10_000  # toolSearch.thresholdTokens: above it, MCP tools are deferred

    def startable(self) -> list[ServerConfig]:
        return [s for s in self.servers.values() if s.enabled and s.name not in self.disabled]


def config_files(cwd: str, agent_dir: str) -> list[tuple[str, str]]:
    """``(path, scope)`` of the files that may hold servers, lowest precedence first."""
    return [(os.path.join(agent_dir, "mcp.json"), "user"), (os.path.join(cwd, ".mcp.json"), "project"),
            (os.path.join(cwd, ".pisces", "mcp.json"), "project")]


def any_config_present(cwd: str, agent_dir: str) -> bool:
    """Cheap start-up test: does any configuration file exist (nothing else of MCP runs without one)."""
    return any(os.path.exists(path) for path, _ in config_files(cwd, agent_dir))


def _str_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be an array of strings")
    return list(value)


def _str_map(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"{where} must be an object of strings")
    return dict(value)


def _ms(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f"{where} must be a positive number of milliseconds")
    return int(value)


def parse_server(name: str, raw: Any, source: str, scope: str) -> ServerConfig:
    where = f"mcpServers.{name} in {source}"
    if not _NAME.match(name):
        raise ConfigError(f"{where}: a server name is 1-64 letters, digits, '_', '-' or '.'")
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be an object")
    kind = raw.get("type")
    if kind in ("streamable-http", "streamableHttp", "http"):
        kind = "http"
    elif kind is None:
        kind = "http" if "url" in raw and "command" not in raw else "stdio"
    if kind not in ("stdio", "http", "sse"):
        raise ConfigError(f"{where}: type must be stdio, http or sse (got {json.dumps(kind)})")
    cfg = ServerConfig(name=name, transport=kind, source=source, scope=scope)
    if kind == "stdio":
        if not isinstance(raw.get("command"), str) or not raw["command"].strip():
            raise ConfigError(f"{where}: a stdio server needs 'command'")
        cfg.command = raw["command"]
        cfg.args = _str_list(raw.get("args", []), f"{where}: args")
        cfg.env = _str_map(raw.get("env", {}), f"{where}: env")
        if raw.get("cwd") is not None:
            if not isinstance(raw["cwd"], str):
                raise ConfigError(f"{where}: cwd must be a string")
            cfg.cwd = raw["cwd"]
    else:
        if not isinstance(raw.get("url"), str) or not raw["url"].strip():
            raise ConfigError(f"{where}: a {kind} server needs 'url'")
        cfg.url = raw["url"]
        cfg.headers = _str_map(raw.get("headers", {}), f"{where}: headers")
    if "enabled" in raw:
        if not isinstance(raw["enabled"], bool):
            raise ConfigError(f"{where}: enabled must be true or false")
        cfg.enabled = raw["enabled"]
    if "timeout" in raw:
        cfg.timeout_ms = _ms(raw["timeout"], f"{where}: timeout")
    if "toolTimeout" in raw:
        cfg.tool_timeout_ms = _ms(raw["toolTimeout"], f"{where}: toolTimeout")
    if "includeTools" in raw:
        cfg.include_tools = _str_list(raw["includeTools"], f"{where}: includeTools")
    if "excludeTools" in raw:
        cfg.exclude_tools = _str_list(raw["excludeTools"], f"{where}: excludeTools")
    if "approvalTier" in raw:
        if raw["approvalTier"] not in ("read", "write", "exec"):
            raise ConfigError(f"{where}: approvalTier must be read, write or exec")
        cfg.approval_tier = raw["approvalTier"]
    if "alwaysLoad" in raw:
        cfg.always_load = bool(raw["alwaysLoad"])
    if "oauth" in raw:
        if not isinstance(raw["oauth"], bool):
            raise ConfigError(f"{where}: oauth must be true or false")
        cfg.oauth = raw["oauth"]
    return cfg


def _read(path: str) -> dict[str, Any] | None:
    try:
        data = read_bytes(path, _MAX_FILE)
    except FileNotFoundError:
        return None
    except ValueError as exc:  # too large, not a regular file
        raise ConfigError(f"cannot read {path}: {exc}") from None
    try:
        parsed = json.loads(data.decode("utf-8-sig")) if data.strip() else {}
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"{path} must hold a JSON object")
    return parsed


def load_config(cwd: str, agent_dir: str, *, trusted: bool | None = None,
                extra: dict[str, Any] | None = None, imports: Any = None) -> McpConfig:
    """The merged configuration. ``trusted``: whether project servers may start (None: ask
    :func:`is_project_trusted`, only when a project file defines a server). ``extra``: servers a front end
    passed (ACP's ``mcpServers``), as a ``{name: server}`` map of scope ``session``. ``imports``: the setting
    ``mcp.importConfigs`` (other agents' files, pisces.core.mcp.imports), read before pisces' own files."""
    out = McpConfig()
    project: dict[str, ServerConfig] = {}

    def merge(servers: dict[str, Any], path: str, scope: str) -> None:
        for name, raw in servers.items():
            try:
                cfg = parse_server(str(name), raw, path, scope)
            except ConfigError as exc:
                out.errors.append(str(exc))
                continue
            out.servers.pop(cfg.name, None)
            project.pop(cfg.name, None)
            if scope == "project":
                project[cfg.name] = cfg
            else:
                out.servers[cfg.name] = cfg

    if imports:
        from pisces.core.mcp.imports import imported  # noqa: PLC0415 - only with the setting

        found, errors = imported(cwd, imports)
        out.errors.extend(errors)
        for path, scope, servers in found:
            merge(servers, path, scope)
    for path, scope in config_files(cwd, agent_dir):
        try:
            data = _read(path)
        except (ConfigError, OSError) as exc:
            out.errors.append(str(exc))
            continue
        if data is None:
            continue
        servers = data.get("mcpServers", {})
        if not isinstance(servers, dict):
            out.errors.append(f"{path}: mcpServers must be an object")
            servers = {}
        merge(servers, path, scope)
        search = data.get("toolSearch")
        if isinstance(search, dict) and "thresholdTokens" in search:
            value = search["thresholdTokens"]
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                out.defer_threshold_tokens = value
            else:
                out.errors.append(f"{path}: toolSearch.thresholdTokens must be a number of tokens (0: always defer)")
        disabled = data.get("disabledServers", [])
        if isinstance(disabled, list):
            out.disabled.update(str(d) for d in disabled)
        else:
            out.errors.append(f"{path}: disabledServers must be an array of names")
    if project:
        if trusted is None:
            from pisces.core.config.trust import is_project_trusted  # noqa: PLC0415 - only with project servers

            trusted = is_project_trusted(cwd, agent_dir)
        if trusted:
            out.servers.update(project)
        else:
            out.untrusted = list(project.values())
    for name, raw in (extra or {}).items():
        try:
            out.servers[name] = parse_server(str(name), raw, "session", "session")
        except ConfigError as exc:
            out.errors.append(str(exc))
    return out


def untrusted_message(servers: list[ServerConfig]) -> str:
    names = ", ".join(sorted(s.name for s in servers))
    files = ", ".join(sorted({s.source for s in servers}))
    return (f"MCP servers {names} from {files} were not started: this project is not trusted (trust it with "
            "'pisces --trust-project' run in it, the RPC command trust_project, or --approve for one run)")


def expand(text: str, env: dict[str, str] | None = None) -> str:
    """``${VAR}`` and ``${VAR:-default}`` from ``env`` (default: the process environment); a variable that is
    not set and has no default raises :class:`ConfigError` naming it."""
    source = os.environ if env is None else env

    def one(match: re.Match[str]) -> str:
        value = source.get(match.group(1))
        if value is None:
            if match.group(2) is not None:
                return match.group(2)
            raise ConfigError(f"environment variable {match.group(1)} is not set")
        return value

    return _VAR.sub(one, text)


def resolved(cfg: ServerConfig) -> ServerConfig:
    """A copy with ``${VAR}`` expanded: what the transport is given, never written anywhere."""
    from dataclasses import replace  # noqa: PLC0415 - only when a server starts

    return replace(cfg, command=expand(cfg.command), args=[expand(a) for a in cfg.args],
                   env={k: expand(v) for k, v in cfg.env.items()},
                   cwd=expand(cfg.cwd) if cfg.cwd else None, url=expand(cfg.url),
                   headers={k: expand(v) for k, v in cfg.headers.items()})
