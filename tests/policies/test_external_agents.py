"""Cedar decides an external agent's calls from the tools it declares with each call: a real
`hookgate serve` serves an agent with no tools of its own whose org has a policy set (which
loads), and its calls through `POST /api/v1/calls` get the decision `hookgate policy test`
gives the same call; an undeclared tool, and a declared tool the policies do not validate
for, are denied saying why. `GET /api/policies/status` shows the set to org admins only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate.cli.policy_cmd import decide_case
from hookgate.config import load_config
from hookgate.policies.cases import PolicyCase
from tests.instances import Instance

CONFIG = """\
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme}}]
users:
  - {{id: alice, org: acme, admin: true, token: tok-alice}}
  - {{id: bob, org: acme, token: tok-bob}}
models: {{script: {{type: scripted, turns: [{{answer: done}}]}}}}
agents:
  - id: scout
    org: acme
    owner: alice
    model: script
    model_config_json:
      guarded_calls:
        rules: [{{matcher: web__search, writes: false}}]
policies:
  - {{org: acme, path: policies, default: deny}}
"""
POLICIES = """\
@id("short-searches")
permit(principal, action == Action::"web__search", resource)
when { context.args.limit <= 10 };

@id("members-do-not-write")
@reason("only admins run tools that write")
forbid(principal, action in Action::"call_tool", resource)
when { context.writes && !principal.admin };

@id("admins")
permit(principal, action in Action::"call_tool", resource) when { principal.admin };
"""
SEARCH = {"type": "object", "properties": {"query": {"type": "string"},
                                           "limit": {"type": "integer"}},
          "required": ["query", "limit"]}
WRITE = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
LIMIT_AS_TEXT = {"type": "object", "properties": {"query": {"type": "string"},
                                                  "limit": {"type": "string"}}}
TOKENS = {"alice": "tok-alice", "bob": "tok-bob"}
CALLS: list[tuple[str, str, dict[str, Any], dict[str, Any] | None, str]] = [
    # user, tool, arguments, declared parameters, the effect
    ("alice", "web__search", {"query": "cedar", "limit": 5}, SEARCH, "allow"),
    ("bob", "web__search", {"query": "cedar", "limit": 5}, SEARCH, "allow"),
    ("bob", "web__search", {"query": "cedar", "limit": 50}, SEARCH, "deny"),
    ("bob", "file__write", {"path": "notes.txt"}, WRITE, "deny"),
    ("alice", "file__write", {"path": "notes.txt"}, WRITE, "allow"),
    ("bob", "web__search", {"query": "cedar", "limit": 5}, None, "deny"),
    ("bob", "web__search", {"query": "cedar", "limit": "5"}, LIMIT_AS_TEXT, "deny"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Instance, Path]]:
    tmp_path = tmp_path_factory.mktemp("external")
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "scout.cedar").write_text(POLICIES, encoding="utf-8")
    config = tmp_path / "hookgate.yaml"
    config.write_text(CONFIG.format(db=tmp_path / "hookgate.db"), encoding="utf-8")
    server = Instance("external", config, tmp_path)
    server.spawn()
    try:
        server.wait_up()
        yield server, config
    finally:
        server.stop()


async def test_an_external_agents_calls_get_the_decision_policy_test_gives(
        served: tuple[Instance, Path]) -> None:
    server, config = served
    cfg = load_config(config)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        for i, (user, tool, args, params, effect) in enumerate(CALLS):
            body: dict[str, Any] = {"agent": "scout", "session_id": f"s-{user}",
                                    "call_id": f"c{i}", "tool": tool, "arguments": args}
            if params is not None:
                body["parameters"] = params
            answer = (await client.post("/api/v1/calls", json=body, headers={
                "Authorization": f"Bearer {TOKENS[user]}"})).json()
            case = PolicyCase(name=f"call {i}", user=user, tool=tool, expect=effect,
                              args=args, agent="scout", parameters=params)
            said = await decide_case(cfg, case)

            assert (answer["decision"], said.effect) == (effect, effect), (i, answer, said)
            if effect == "deny":
                assert f"policy {said.explanation()}" in answer["reason"], (i, answer)


async def test_the_denials_say_why(served: tuple[Instance, Path]) -> None:
    _, config = served
    cfg = load_config(config)
    undeclared = await decide_case(cfg, PolicyCase(
        name="undeclared", user="bob", tool="web__search", expect="deny",
        args={"query": "x", "limit": 1}, agent="scout"))
    mistyped = await decide_case(cfg, PolicyCase(
        name="mistyped", user="bob", tool="web__search", expect="deny",
        args={"query": "x", "limit": "1"}, agent="scout", parameters=LIMIT_AS_TEXT))

    assert "its call declares no parameters: an undeclared tool is denied" in \
        undeclared.explanation()
    assert "the policies do not validate for the declared tool 'web__search'" in \
        mistyped.explanation()
    assert "scout.cedar:1: policy 'short-searches'" in mistyped.explanation()


def test_the_policy_sets_status_is_shown_to_org_admins_only(
        served: tuple[Instance, Path]) -> None:
    server, _ = served
    with httpx.Client(base_url=server.url, timeout=30) as client:
        admin = client.get("/api/policies/status",
                           headers={"Authorization": "Bearer tok-alice"})
        member = client.get("/api/policies/status",
                            headers={"Authorization": "Bearer tok-bob"})
        nobody = client.get("/api/policies/status")

    assert admin.status_code == 200, admin.text
    (shown,) = admin.json()["sets"]
    assert shown["state"] == "in force" and shown["version"].startswith("cedar-")
    assert shown["agents"] == ["scout"] and shown["error"] is None
    assert member.status_code == 403 and nobody.status_code == 401
