"""``mcp_servers:`` and an agent's ``mcp:`` in the configuration file: mistakes are load
errors naming the key, and a tool's hints and gate rules become its hookgate flags."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from hookgate.config import ConfigError, parse_config
from hookgate.config.mcp_servers import McpServerSpec
from hookgate.mcp.downstream import DownstreamServer
from hookgate.mcp.mapping import McpTool, gateway_tool
from hookgate.tools.errors import ToolArgumentsError


def document(servers: list[dict[str, Any]], access: dict[str, Any]) -> dict[str, Any]:
    return {
        "orgs": [{"id": "acme"}],
        "models": {"idle": {"type": "scripted", "turns": [{"answer": "x"}]}},
        "mcp_servers": servers,
        "agents": [{"id": "coder", "org": "acme", "model": "idle", "mcp": access}],
    }


def problem(servers: list[dict[str, Any]], access: dict[str, Any] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(document(servers, access or {}), env={"TOKEN": "t"})
    return str(caught.value)


def test_a_valid_declaration_loads_with_secrets_from_the_environment() -> None:
    cfg = parse_config(document(
        [{"id": "docs", "url": "http://127.0.0.1:9/mcp",
          "headers": {"Authorization": "Bearer ${TOKEN}"}},
         {"id": "git", "command": "mcp-server-git", "args": ["--repository", "."]}],
        {"servers": ["docs"], "tools": ["mcp__git__git_status"]}), env={"TOKEN": "s3cret"})
    assert cfg.mcp_servers[0].headers == {"Authorization": "Bearer s3cret"}
    access = cfg.agent_spec("coder").mcp
    assert access is not None and access.server_ids() == ["docs", "git"]
    assert access.allows("mcp__git__git_status") and not access.allows("mcp__git__git_reset")
    assert access.allows("mcp__docs__anything")


@pytest.mark.parametrize(("servers", "access", "expected"), [
    ([{"id": "x"}], None, "give 'command' (stdio) or 'url'"),
    ([{"id": "x", "command": "a", "url": "http://h"}], None, "exactly one"),
    ([{"id": "a__b", "command": "a"}], None, "single '_'"),
    ([{"id": "x", "command": "a", "headers": {"k": "v"}}], None, "'headers' are for"),
    ([{"id": "x", "command": "a", "requires_confirmation": [{"matcher": "re:("}]}], None,
     "not a valid regular expression"),
    ([{"id": "x", "command": "a", "requires_confirmation": [{"when": "args.x >"}]}], None,
     "not a valid expression"),
    ([{"id": "x", "command": "a", "tool": {}}], None, "tool"),
    ([{"id": "x", "command": "a"}, {"id": "x", "url": "http://h"}], None, "duplicate id 'x'"),
    ([{"id": "x", "command": "a"}], {"servers": ["y"]}, "unknown MCP server 'y'"),
    ([{"id": "x", "command": "a"}], {"tools": ["x__status"]}, "not an MCP tool name"),
    ([{"id": "x", "command": "a"}], {"tools": ["mcp__z__status"]}, "unknown MCP server 'z'"),
])
def test_mistakes_are_load_errors_naming_the_key(
        servers: list[dict[str, Any]], access: dict[str, Any] | None, expected: str) -> None:
    assert expected in problem(servers, access)


def listed(name: str, read_only: bool | None, destructive: bool | None = None) -> types.Tool:
    hints = None if read_only is None and destructive is None else types.ToolAnnotations(
        read_only_hint=read_only, destructive_hint=destructive)
    schema = {"type": "object", "properties": {"amount": {"type": "number"},
                                               "note": {"type": "string"}}}
    return types.Tool(name=name, input_schema=schema, annotations=hints)


def mapped(spec: dict[str, Any], entry: types.Tool) -> McpTool:
    tool = gateway_tool(DownstreamServer(McpServerSpec.model_validate(spec)), entry,
                        "coder", "acme")
    assert isinstance(tool, McpTool)
    return tool


def test_hints_map_to_writes_unless_the_configuration_overrides_them() -> None:
    spec = {"id": "s", "command": "x", "tools": {"peek": {"writes": True}}}
    assert mapped(spec, listed("read", True)).writes is False
    assert mapped(spec, listed("write", False)).writes is True
    assert mapped(spec, listed("unhinted", None)).writes is True
    assert mapped(spec, listed("contradictory", True, True)).writes is True
    assert mapped(spec, listed("peek", True)).writes is True
    assert mapped(spec, listed("read", True)).connector == "mcp__s"


def test_gate_rules_match_by_name_and_when_and_fail_closed() -> None:
    spec = {"id": "pay", "command": "x",
            "requires_confirmation": [{"matcher": "refund"},
                                      {"matcher": "re:^charge", "when": "args.amount > 100"}],
            "tools": {"ping": {"requires_confirmation": True}}}
    assert mapped(spec, listed("refund", False)).needs_confirmation({}) is True
    charge = mapped(spec, listed("charge_card", False))
    assert charge.needs_confirmation({"amount": 500}) is True
    assert charge.needs_confirmation({"amount": 5}) is False
    assert charge.needs_confirmation({}) is True  # cannot be evaluated: ask a person
    assert mapped(spec, listed("balance", True)).needs_confirmation({"amount": 500}) is False
    assert mapped(spec, listed("ping", True)).needs_confirmation({}) is True


DEEP: Any = "bottom"
for _ in range(70):
    DEEP = [DEEP]


@pytest.mark.parametrize("args", [
    {"amount": float("nan")}, {"amount": float("inf")}, {"note": "\ud800"},
    {"amount": "12"}, {"note": DEEP},
])
def test_arguments_that_are_not_plain_json_or_break_the_schema_are_refused(
        args: dict[str, Any]) -> None:
    tool = mapped({"id": "pay", "command": "x"}, listed("charge", False))
    assert tool.validate({"amount": 12, "note": "ok"}) == {"amount": 12, "note": "ok"}
    with pytest.raises(ToolArgumentsError) as caught:
        tool.validate(args)
    assert "invalid arguments for 'mcp__pay__charge'" in str(caught.value)
