"""`hookgate policy replay` over a recorded audit log of 50,000 calls on SQLite (10,000 on
PostgreSQL: the same code over the other backend; bulk-written through the audit store)
reports exactly the changes the candidate gives
when it decides the same calls live, from their original arguments: per rule, per direction,
with the not-replayable calls (arguments stored masked, a user the candidate does not know)
counted and never decided; calls outside the period are left out. `--ci` counts every ask as
a deny and exits 1 on a change; `--json` is the report."""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hookgate.catalog.builtin.audit_log import AuditLog
from hookgate.cli.policy_cmd import CaseDecider, replay_candidate
from hookgate.config import load_config
from hookgate.config.schema import HookgateConfig
from hookgate.hooks.model import HookContext, HookPoint
from hookgate.policies.cases import PolicyCase
from hookgate.policies.replay import in_ci
from hookgate.storage.audit import AuditLogStore, AuditRecord
from hookgate.storage.database import Database
from tests.policies.world import INVARIANTS

ROOT = Path(__file__).resolve().parents[2]
CANDIDATE = INVARIANTS + """
@id("members-few-units")
@reason("members order at most 5 units")
forbid(principal, action == Action::"oa__purchase_pay", resource)
when { principal.role != "admin" && context.args has units && context.args.units > 5 };

@id("globex-asks")
@ask("Globex payments need a look")
permit(principal, action == Action::"oa__purchase_pay", resource)
when { context.args.vendor == "Globex" };

@id("no-night-payments")
@reason("no payments at night")
forbid(principal, action == Action::"oa__purchase_pay", resource)
when { context.hour < 6 };
"""
CONFIG = """\
database: {db}
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
  - {{org: acme, path: candidate, default: deny}}
  - {{org: ro, path: candidate, default: deny}}
"""
CALLERS = {"buyer": ("alice", "bob", "dave"), "ro_buyer": ("carol",)}
START = datetime(2026, 11, 2, tzinfo=UTC)
#: The period replayed: a week; the generated calls span nine days around it.
SINCE, UNTIL = START + timedelta(days=1), START + timedelta(days=8)
RECORDED = (("ok", None, None), ("blocked", "cedar_policy", None),
            ("ok", "u-approver", "req-1"), ("blocked", "approval_gate", "req-2"),
            ("blocked", "argument_validation", None))


def generated(count: int, seed: int) -> list[dict[str, Any]]:
    """Calls with what was decided then (outcome, approver, request) and when."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        agent = rng.choice(sorted(CALLERS))
        user = rng.choice(CALLERS[agent])
        if rng.random() < 0.2:
            tool, args = "crm__lookup", {"customer": rng.choice(["Globex", "Initech", 7])}
        else:
            tool = "oa__purchase_pay"
            args = {"amount": rng.choice([10, 12000, 50001, 60000.25, "lots", 1.23456]),
                    "vendor": rng.choice(["ACME", "Globex", "Initech"])}
            if rng.random() < 0.5:
                args["units"] = rng.choice([1, 5, 6, 40, "3"])
            if rng.random() < 0.05:
                args["api_token"] = "tok-123"  # stored masked: not replayable
        at = START + timedelta(seconds=rng.randrange(9 * 86_400))
        out.append({"i": i, "agent": agent, "user": user, "tool": tool, "args": args,
                    "at": at, "recorded": rng.choice(RECORDED)})
    return out


def recorded_effect(call: dict[str, Any]) -> str:
    outcome, _, request = call["recorded"]
    return "ask" if request else "deny" if outcome == "blocked" else "allow"


async def record(db: Database, calls: list[dict[str, Any]]) -> None:
    """Each call's row as the audit_log hook makes it (masking included), written in bulk
    through the audit store's own batch write (the chains hashed as always)."""
    hook = AuditLog(sink=None)  # type: ignore[arg-type]
    org = {"buyer": "acme", "ro_buyer": "ro"}
    records: list[AuditRecord] = []
    for call in calls:
        ctx = HookContext(hook_point=HookPoint.PRE_TOOL_USE, tool_name=call["tool"],
                          tool_args=call["args"], agent_id=call["agent"], user_id=call["user"],
                          metadata={"org_id": org[call["agent"]], "execution_path": "react",
                                    "run_id": f"r{call['i']}"})
        outcome, by, request = call["recorded"]
        row = hook.record(ctx, call["args"], outcome, by, None)
        records.append(dataclasses.replace(row, created_at=call["at"],
                                           approver="bob" if request else None,
                                           request_id=request))
    store = AuditLogStore(db)
    for start in range(0, len(records), 5000):
        await store._write(records[start:start + 5000])


def live_changes(cfg: HookgateConfig, calls: list[dict[str, Any]], ci: bool = False
                 ) -> tuple[Counter[tuple[str, str, str]], int, int]:
    """The changes the candidate gives deciding the calls of the period from their original
    arguments (no audit row involved), and how many calls are not replayable."""
    import asyncio

    async def run() -> tuple[Counter[tuple[str, str, str]], int, int]:
        decider = CaseDecider(cfg)
        changes: Counter[tuple[str, str, str]] = Counter()
        skipped = in_period = 0
        for call in calls:
            if not SINCE <= call["at"] < UNTIL:
                continue
            in_period += 1
            if "api_token" in call["args"] or call["user"] == "dave":
                skipped += 1
                continue
            decision = await decider.decide(PolicyCase(
                name="live", user=call["user"], tool=call["tool"], expect="allow",
                args=call["args"], agent=call["agent"], now=call["at"].isoformat()))
            before = in_ci(recorded_effect(call), ci)  # type: ignore[arg-type]
            after = in_ci(decision.effect, ci)
            if before != after:
                changes[(", ".join(decision.policy_ids) or "(default)", before, after)] += 1
        return changes, skipped, in_period

    return asyncio.run(run())


@functools.cache
def calls() -> list[dict[str, Any]]:
    """The calls every test here records and replays: made on first use, not when the module
    is collected (each test worker collects every module)."""
    return generated(50_000, seed=46)


#: How many of calls() each backend records and replays.
RECORDED_ON = {"sqlite": 50_000, "postgresql": 10_000}


@pytest.fixture(scope="module")
def candidate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("replay")
    (base / "candidate").mkdir()
    (base / "candidate" / "rules.cedar").write_text(CANDIDATE, encoding="utf-8")
    return base


@pytest.fixture(scope="module")
def live(candidate: Path) -> dict[int, tuple[Counter[tuple[str, str, str]], int, int]]:
    """What the candidate gives live over the first N calls, for each N a backend records."""
    config = candidate / "live.yaml"
    config.write_text(CONFIG.format(db="sqlite+aiosqlite:///unused.db"), encoding="utf-8")
    cfg = load_config(config)
    out: dict[int, tuple[Counter[tuple[str, str, str]], int, int]] = {}
    changes, skipped, in_period, done = Counter[tuple[str, str, str]](), 0, 0, 0
    for n in sorted(set(RECORDED_ON.values())):  # each call decided once
        more = live_changes(cfg, calls()[done:n])
        changes, skipped, in_period = changes + more[0], skipped + more[1], in_period + more[2]
        out[n], done = (changes, skipped, in_period), n
    return out


def candidate_config(candidate: Path, url: str, name: str) -> Path:
    config = candidate / name
    config.write_text(CONFIG.format(db=url), encoding="utf-8")
    return config


@pytest.mark.both_databases
@pytest.mark.timeout(900)  # 50,000 calls written and replayed on a busy machine
async def test_replay_reports_the_changes_the_candidate_gives_live(
        db: Database, database_url: str, candidate: Path, live: Any) -> None:
    count = RECORDED_ON[database_url.split("+")[0]]
    await record(db, calls()[:count])
    cfg = load_config(candidate_config(candidate, database_url, "candidate.yaml"))

    report = await replay_candidate(cfg, database_url, SINCE, UNTIL)

    changes, skipped, in_period = live[count]
    assert report.calls == in_period
    assert sum(report.not_replayable.values()) == skipped
    assert set(report.not_replayable) == {"arguments stored masked",
                                          "user not in the candidate configuration"}
    found = Counter({key: c.count for key, c in report.changes.items()})
    assert found == changes
    assert report.replayed == in_period - skipped
    assert report.unchanged == report.replayed - sum(changes.values())
    # The candidate's new rules show up by name, each way they change decisions.
    rules = {rule for rule, _, _ in found}
    assert "globex-asks" in rules, rules
    assert any("no-night-payments" in rule for rule in rules), rules
    for change in report.changes.values():
        assert 1 <= len(change.examples) <= 3
        assert all(SINCE.isoformat() <= e["at"] < UNTIL.isoformat() for e in change.examples)


def test_the_command_reports_json_and_fails_ci_on_a_change(candidate: Path, tmp_path: Path
                                                           ) -> None:
    import asyncio

    url = f"sqlite+aiosqlite:///{tmp_path / 'hookgate.db'}"
    calls = generated(600, seed=7)

    async def prepare() -> None:
        db = Database(url)
        try:
            await db.upgrade()
            await record(db, calls)
        finally:
            await db.dispose()

    asyncio.run(prepare())
    config = candidate_config(candidate, url, "cli.yaml")
    args = ["--config", str(config), "--since", SINCE.isoformat(), "--until",
            UNTIL.isoformat(), "--json"]

    plain, ci = run_cli("replay", *args), run_cli("replay", *args, "--ci")

    assert plain.returncode == 0, plain.stderr[-2000:]
    assert ci.returncode == 1, ci.stderr[-2000:]
    for done, is_ci in ((plain, False), (ci, True)):
        said = json.loads(done.stdout)
        changes, skipped, in_period = live_changes(load_config(config), calls, ci=is_ci)
        assert said["ci"] is is_ci
        assert said["calls"] == in_period and said["not_replayable"]["count"] == skipped
        assert {(c["rule"], c["from"], c["to"]): c["count"]
                for c in said["changes"]} == dict(changes)
        if is_ci:
            assert all("ask" not in (c["from"], c["to"]) for c in said["changes"])


def test_the_command_exits_0_under_ci_when_nothing_changes(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'hookgate.db'}"
    (tmp_path / "candidate").mkdir()
    (tmp_path / "candidate" / "rules.cedar").write_text(INVARIANTS, encoding="utf-8")
    config = tmp_path / "cli.yaml"
    config.write_text(CONFIG.format(db=url), encoding="utf-8")
    import asyncio

    async def prepare() -> None:
        db = Database(url)
        try:
            await db.upgrade()
            await record(db, [{"i": 0, "agent": "buyer", "user": "alice", "tool": "crm__lookup",
                               "args": {"customer": "Initech"}, "at": SINCE,
                               "recorded": ("ok", None, None)}])
        finally:
            await db.dispose()

    asyncio.run(prepare())
    done = run_cli("replay", "--config", str(config), "--since", SINCE.isoformat(),
                   "--until", UNTIL.isoformat(), "--ci")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 calls" in done.stdout and "0 would change" in done.stdout


@pytest.mark.parametrize(("extra", "said"), [
    (["--since", "yesterday"], "--since takes a duration"),
    (["--since", "1d", "--until", "2d"], "must be after --since"),
])
def test_bad_periods_are_refused_in_one_line(tmp_path: Path, extra: list[str], said: str
                                             ) -> None:
    (tmp_path / "candidate").mkdir()
    (tmp_path / "candidate" / "rules.cedar").write_text(INVARIANTS, encoding="utf-8")
    config = tmp_path / "cli.yaml"
    config.write_text(CONFIG.format(db=f"sqlite+aiosqlite:///{tmp_path / 'h.db'}"),
                      encoding="utf-8")
    done = run_cli("replay", "--config", str(config), *extra)
    assert done.returncode == 2
    assert said in done.stderr + done.stdout


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookgate.cli.main", "policy", *args], capture_output=True,
        text=True, timeout=300, cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "COLUMNS": "300", "NO_COLOR": "1",
             "PATH": "/usr/bin:/bin"})
