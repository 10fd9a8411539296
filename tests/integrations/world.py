"""The hookgate the framework adapters' tests ask: one configuration, loaded in process
(`AsyncLocalGuard`) or served by a real `hookgate serve`, with the people and rules the
stories need.

- ``buyer`` (org acme): ``pay`` above 100 needs a person; card numbers in any tool's output are
  masked by a PostToolUse hook before the model sees them.
- ``clerk`` (org acme): the buyer's sub-agent; its ``pay`` always needs a person.
- ``archivist`` (org vault, read-only): ``write_note`` writes, so the read-only guard blocks it.
- ``scout`` (org acme): ``search`` reads, at most 4 a day per user (a rate limit every process
  of the server counts).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ALICE_TOKEN = "tok-integrations-alice"
CARD = re.compile(r"\b(?:\d[ -]?){13,16}\b")
MASK = "**** **** **** ****"


def scrub_card_numbers(event: dict[str, Any]) -> dict[str, Any] | None:
    """PostToolUse: card numbers never reach the model."""
    response = event["tool_response"]
    text = response if isinstance(response, str) else str(response)
    if not CARD.search(text):
        return None
    return {"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                   "updatedToolOutput": CARD.sub(MASK, text)}}


#: (agent, session, parent session, parent agent, depth) of every call asked, in process.
LINEAGE: list[tuple[str, str, str | None, str | None, int]] = []


def note_lineage(event: dict[str, Any]) -> None:
    """PreToolUse: what the hooks' context says of the call's place under its delegators."""
    meta = event["metadata"]
    LINEAGE.append((event["hookgate_agent_id"], meta["session_id"], meta["parent_session"],
                    meta["parent_agent_id"], meta["depth"]))


def _agent(agent_id: str, org: str, owner: str, rules: list[str],
           class_hooks: str = "audit_log, readonly_guard") -> str:
    lines = "\n".join(f"          - {rule}" for rule in rules)
    return f"""
  - id: {agent_id}
    name: {agent_id}
    org: {org}
    owner: {owner}
    model: idle
    instructions: runs in a framework of its own
    confirmation_approver_scope: org_members
    model_config_json:
      hooks:
        class_hooks: [{class_hooks}]
        python_hooks:
          - {{event: PostToolUse, function: "tests.integrations.world:scrub_card_numbers"}}
          - {{event: PreToolUse, function: "tests.integrations.world:note_lineage"}}
      guarded_calls:
        wait_s: 0
        rules:
{lines}
"""


def config_text(database_url: str) -> str:
    return f"""
database: {database_url}
orgs:
  - {{id: acme, name: ACME}}
  - {{id: vault, name: Vault, read_only: true}}
users:
  - {{id: alice, org: acme, admin: true, token: {ALICE_TOKEN}}}
  - {{id: vera, org: vault, admin: true}}
models:
  idle: {{type: scripted, turns: [{{answer: "-"}}]}}
agents:{_agent("buyer", "acme", "alice",
               ['{matcher: pay, when: "args.amount > 100", requires_confirmation: true}'])}\
{_agent("clerk", "acme", "alice", ["{matcher: pay, requires_confirmation: true}"])}\
{_agent("archivist", "vault", "vera", ["{matcher: write_note, writes: true}"])}\
{_agent("scout", "acme", "alice", ["{matcher: search, writes: false, connector: searches}"],
        'audit_log, {name: connector_rate_limit, params: {limits: {searches: "4/day"}}}')}"""


def write_config(folder: Path, database_url: str) -> Path:
    path = folder / "hookgate.yaml"
    path.write_text(config_text(database_url), encoding="utf-8")
    return path
