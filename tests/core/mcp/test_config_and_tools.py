"""MCP configuration (files, precedence, trust, ${VAR}) and tool shaping (names, schemas, bounded results).
Stdlib-only modules: these run without the SDK."""

from __future__ import annotations

import json
import os

import pytest

from pisces.core.mcp.config import ConfigError, expand, load_config, parse_server, resolved
from pisces.core.mcp.tools import MAX_NAME, result_content, sanitize_schema, tool_name


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f)


def test_files_merge_in_precedence_and_trust_gates_project_servers(tmp_path):
    agent, proj = str(tmp_path / "agent"), str(tmp_path / "proj")
    write(f"{agent}/mcp.json", {"mcpServers": {"a": {"command": "user-a"}, "b": {"url": "https://x/mcp"}},
                                "disabledServers": ["b"]})
    write(f"{proj}/.mcp.json", {"mcpServers": {"a": {"command": "portable-a"}, "c": {"command": "c"}}})
    write(f"{proj}/.pisces/mcp.json", {"mcpServers": {"c": {"command": "pisces-c", "enabled": False}}})
    trusted = load_config(proj, agent, trusted=True)
    assert trusted.servers["a"].command == "portable-a" and trusted.servers["c"].command == "pisces-c"
    assert trusted.servers["b"].transport == "http"
    assert [s.name for s in trusted.startable()] == ["a"]  # b disabled by name, c by enabled: false
    untrusted = load_config(proj, agent, trusted=False)
    assert set(untrusted.servers) == {"b"}  # the user's a is overridden by the project's, which cannot start
    assert sorted(s.name for s in untrusted.untrusted) == ["a", "c"]


def test_bad_entries_are_reported_and_skipped(tmp_path):
    agent, proj = str(tmp_path / "agent"), str(tmp_path / "proj")
    write(f"{agent}/mcp.json", {"mcpServers": {"ok": {"command": "x"}, "bad name!": {"command": "x"},
                                               "nocmd": {}, "t": {"type": "ws", "url": "u"},
                                               "to": {"command": "x", "timeout": -1}}})
    os.makedirs(proj)
    with open(f"{proj}/.mcp.json", "w") as f:
        f.write("{not json")
    cfg = load_config(proj, agent, trusted=True)
    assert list(cfg.servers) == ["ok"]
    text = "\n".join(cfg.errors)
    assert "bad name!" in text and "needs 'command'" in text and "type must be" in text
    assert "timeout must be" in text and "not valid JSON" in text


def test_env_references_expand_at_start_and_stay_references(monkeypatch):
    monkeypatch.setenv("TOKEN_X", "s3cret")
    monkeypatch.delenv("MISSING_X", raising=False)
    cfg = parse_server("gh", {"url": "https://h/${MISSING_X:-mcp}", "headers": {"Authorization": "Bearer ${TOKEN_X}"}},
                       "f", "user")
    real = resolved(cfg)
    assert real.headers["Authorization"] == "Bearer s3cret" and real.url == "https://h/mcp"
    assert "s3cret" not in json.dumps(cfg.public()) and cfg.headers["Authorization"] == "Bearer ${TOKEN_X}"
    with pytest.raises(ConfigError, match="MISSING_X is not set"):
        expand("${MISSING_X}")


def test_tool_names_stay_within_provider_limits_and_apart():
    assert tool_name("github", "create_issue") == "mcp__github__create_issue"
    assert tool_name("my.server", "a b") == "mcp__my_server__a_b"
    long1, long2 = tool_name("s" * 40, "t" * 40 + "1"), tool_name("s" * 40, "t" * 40 + "2")
    assert len(long1) == len(long2) == MAX_NAME and long1 != long2


def test_schemas_lose_what_gemini_rejects():
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
              "additionalProperties": False, "$defs": {"P": {"type": "object", "properties": {"x": {"const": 1}},
                                                             "additionalProperties": False}},
              "properties": {"p": {"$ref": "#/$defs/P"}, "n": {"type": ["string", "null"]}},
              "required": ["p", "gone"]}
    clean = sanitize_schema(schema)
    text = json.dumps(clean)
    for word in ("$ref", "$defs", "$schema", "additionalProperties", "const"):
        assert word not in text
    assert clean["properties"]["p"]["properties"]["x"] == {"enum": [1]}
    assert clean["properties"]["n"]["type"] == "string" and clean["required"] == ["p"]
    cyclic = {"type": "object", "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}},
              "properties": {"n": {"$ref": "#/$defs/N"}}}
    assert len(json.dumps(sanitize_schema(cyclic))) < 10_000  # a cycle is cut, not followed forever
    assert sanitize_schema(None) == {"type": "object", "properties": {}}


def test_results_are_bounded():
    content, truncated = result_content([{"type": "text", "text": "x" * 5_000_000}])
    assert truncated and len(content[0].text) < 60_000 and "truncated" in content[0].text
    content, truncated = result_content([{"type": "text", "text": "a\n" * 10}])
    assert not truncated and content[0].text == "a\n" * 10
