"""Shadow mode holds on the guarded-call API too: a real `hookgate serve` decides an
external agent's calls (`POST /api/v1/calls`) with the org's policy set, whose
``@mode("shadow")`` policy never changes an answer and whose verdict lands in the audit row
(the hook chain every path runs records it: policies/shadow.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

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
      hooks: {{class_hooks: [audit_log]}}
      guarded_calls:
        rules: [{{matcher: web__search, writes: false}}]
policies:
  - {{org: acme, path: policies, default: deny}}
"""
POLICIES = """\
@id("short-searches")
permit(principal, action == Action::"web__search", resource)
when { context.args.limit <= 10 };

@id("tight-searches")
@mode("shadow")
@reason("searches return at most 3 results")
forbid(principal, action == Action::"web__search", resource)
when { context.args.limit > 3 };
"""
SEARCH = {"type": "object", "properties": {"query": {"type": "string"},
                                           "limit": {"type": "integer"}},
          "required": ["query", "limit"]}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Instance, Path]]:
    tmp_path = tmp_path_factory.mktemp("shadow-external")
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "scout.cedar").write_text(POLICIES, encoding="utf-8")
    config = tmp_path / "hookgate.yaml"
    config.write_text(CONFIG.format(db=tmp_path / "hookgate.db"), encoding="utf-8")
    server = Instance("shadow-external", config, tmp_path)
    server.spawn()
    try:
        server.wait_up()
        yield server, tmp_path / "hookgate.db"
    finally:
        server.stop()


async def test_a_shadow_policy_never_changes_an_external_call_and_is_audited(
        served: tuple[Instance, Path]) -> None:
    server, db = served
    answers: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        for i, limit in enumerate((5, 50)):
            body = {"agent": "scout", "session_id": "s-bob", "call_id": f"c{i}",
                    "tool": "web__search", "arguments": {"query": "cedar", "limit": limit},
                    "parameters": SEARCH}
            answers.append((await client.post("/api/v1/calls", json=body, headers={
                "Authorization": "Bearer tok-bob"})).json())

    # Enforced: limit 5 is permitted, limit 50 is not; the shadow forbid decides neither.
    assert [a["decision"] for a in answers] == ["allow", "deny"], answers
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT outcome, detail FROM connector_call_logs "
                            "WHERE tool_name = 'web__search' ORDER BY id").fetchall()
    blocked = [detail for outcome, detail in rows if outcome == "blocked"]
    assert len(blocked) == 1, rows
    assert "shadow policy tight-searches: would deny" in blocked[0]
    assert "searches return at most 3 results" in blocked[0]
