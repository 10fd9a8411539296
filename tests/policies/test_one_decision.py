"""`hookgate policy test` decides with the same function and the same converted facts as a
running server: over generated calls (arguments of the right type, of a type the signature
converts, of a type it refuses, and values Cedar cannot hold), the engine's decision in a
real run and `policy test`'s (its function, and the real command as a subprocess) are the
same text: effect, deciding policies, reasons and policy-set version."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from hookgate import ReActEngine, ScriptedLLM
from hookgate.cli.policy_cmd import decide_case
from hookgate.config import load_config
from hookgate.config.schema import HookgateConfig
from hookgate.hooks.services import HookServices
from hookgate.policies.cases import PolicyCase
from hookgate.runtime.declarations import write_declarations
from hookgate.runtime.deployment import deployment_from_config
from hookgate.storage.database import Database
from tests.policies.world import INVARIANTS

ROOT = Path(__file__).resolve().parents[2]
POLICIES = INVARIANTS + """
@id("members-few-units")
@reason("members order at most 5 units")
forbid(principal, action == Action::"oa__purchase_pay", resource)
when { principal.role != "admin" && context.args has units && context.args.units > 5 };

@id("no-secret-memos")
@reason("memos carry no secrets")
forbid(principal, action == Action::"oa__purchase_pay", resource)
when { context.args has memo && context.args.memo like "*secret*" };
"""
CONFIG = """\
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme, read_only: false}}, {{id: ro, read_only: true}}]
users:
  - {{id: alice, org: acme, admin: true}}
  - {{id: bob, org: acme}}
  - {{id: carol, org: ro}}
tools: [tests.policies.world:oa__purchase_pay, tests.policies.world:crm__lookup]
models: {{script: {{type: scripted, turns: [{{answer: done}}]}}}}
agents:
  - {{id: buyer, org: acme, owner: alice, model: script, tools: [oa__purchase_pay, crm__lookup],
     model_config_json: {{hooks: {{class_hooks: [audit_log]}}}}}}
  - {{id: ro_buyer, org: ro, model: script, tools: [oa__purchase_pay, crm__lookup]}}
policies:
  - {{org: acme, path: policies, default: deny}}
  - {{org: ro, path: policies, default: deny}}
"""
CALLERS = {"buyer": ("alice", "bob"), "ro_buyer": ("carol",)}
AMOUNTS: list[Any] = [0, 12000, 50000, 50001, 60000, 12.5, 60000.25, 1.23456, 1e300, "60000",
                      "12.5", "lots", True, None, -5, 2**70]
UNITS: list[Any] = [1, 5, 6, 40, "3", "9", 2.0, 2.5, "many", 2**70]
MEMOS: list[Any] = ["for Q3", "top secret", "", 7, None]


def generated_calls(count: int, seed: int) -> list[dict[str, Any]]:
    """(agent, user, tool, arguments), of every kind the lists above mix."""
    rng = random.Random(seed)
    calls = []
    for _ in range(count):
        agent = rng.choice(sorted(CALLERS))
        user = rng.choice(CALLERS[agent])
        if rng.random() < 0.2:
            args: dict[str, Any] = {"customer": rng.choice(["Globex", 42, "Initech"])}
            calls.append({"agent": agent, "user": user, "tool": "crm__lookup", "args": args})
            continue
        args = {"amount": rng.choice(AMOUNTS), "vendor": rng.choice(["ACME", "Globex", 9])}
        if rng.random() < 0.5:
            args["units"] = rng.choice(UNITS)
        if rng.random() < 0.4:
            args["memo"] = rng.choice(MEMOS)
        if rng.random() < 0.05:
            del args["amount"]
        calls.append({"agent": agent, "user": user, "tool": "oa__purchase_pay", "args": args})
    return calls


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, HookgateConfig]:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "rules.cedar").write_text(POLICIES, encoding="utf-8")
    config = tmp_path / "hookgate.yaml"
    config.write_text(CONFIG.format(db=tmp_path / "hookgate.db"), encoding="utf-8")
    return config, load_config(config)


async def engine_said(db: Database, cfg: HookgateConfig, call: dict[str, Any]) -> str:
    """What the running engine's cedar_policy hook said about the call ("invalid" when the
    engine refused the arguments before any hook)."""
    agent = cfg.build_agent(call["agent"])
    engine = ReActEngine(ScriptedLLM([{"tool_calls": [{"name": call["tool"],
                                                        "args": call["args"]}]},
                                      {"answer": "done"}]),
                         services=HookServices(database=db))
    result = await engine.run(agent, "go", user_id=call["user"], org_id=agent.org_id)
    (event,) = [e for e in result.trace if e["type"] in ("tool_result", "tool_blocked")]
    if event["status"] == "invalid":
        return "invalid"
    said = [s.removeprefix("cedar_policy: ") for s in event.get("side_effects") or ()
            if s.startswith("cedar_policy: policy ")]
    assert len(said) == 1, repr(event)
    return str(said[0])


def case_of(call: dict[str, Any], expect: str = "allow") -> PolicyCase:
    return PolicyCase(name="generated", user=call["user"], tool=call["tool"], expect=expect,
                      args=dict(call["args"]), agent=call["agent"])


async def test_policy_test_and_the_engine_decide_every_generated_call_alike(
        world: tuple[Path, HookgateConfig]) -> None:
    _, cfg = world
    db = Database(cfg.database)
    await db.upgrade()
    await write_declarations(db, deployment_from_config(cfg))
    kinds: set[str] = set()
    try:
        for call in generated_calls(120, seed=39):
            engine = await engine_said(db, cfg, call)
            cli = f"policy {(await decide_case(cfg, case_of(call))).explanation()}"
            if engine == "invalid":  # the hook never saw it; policy test denies it, saying why
                assert cli.startswith("policy deny (invalid arguments"), (call, cli)
            else:
                assert cli == engine, call
            kinds.add(engine.split(" ")[1] if engine != "invalid" else engine)
    finally:
        await db.dispose()
    assert kinds == {"allow", "deny", "ask", "invalid"}


async def test_the_policy_test_command_agrees_with_the_engine_as_a_subprocess(
        world: tuple[Path, HookgateConfig]) -> None:
    config, cfg = world
    db = Database(cfg.database)
    await db.upgrade()
    await write_declarations(db, deployment_from_config(cfg))
    rows = []
    try:
        for call in generated_calls(30, seed=40):
            said = await engine_said(db, cfg, call)
            rows.append({"name": f"case {len(rows)}", "agent": call["agent"],
                         "user": call["user"], "tool": call["tool"], "args": call["args"],
                         "expect": "deny" if said == "invalid" else said.split(" ")[1]})
    finally:
        await db.dispose()
    cases = config.parent / "cases.yaml"
    cases.write_text(yaml.safe_dump({"cases": rows}), encoding="utf-8")

    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "hookgate.cli.main", "policy", "test",
                         str(cases), "--config", str(config)],
        capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "COLUMNS": "300", "NO_COLOR": "1",
             "PATH": "/usr/bin:/bin"})

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"{len(rows)} passed, 0 failed" in done.stdout
