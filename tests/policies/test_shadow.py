"""Shadow mode on the real engine over a real database: a Cedar policy annotated
``@mode("shadow")``, a whole policy set declared ``mode: shadow`` and a declared hook in
shadow mode are evaluated on every call, never change it (their failures neither), and
record what they would have decided in the trace and the audit row; a switch to enforce
is a stamped reload."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from hookgate import Agent
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.services import HookServices
from hookgate.policies import metrics
from hookgate.policies.reload import reload_policies
from hookgate.policies.shadow import SPAN_ATTRIBUTE
from hookgate.storage.database import Database
from hookgate.storage.tables import ConnectorCallLog
from tests.policies.world import INVARIANTS, PAID, TOOLS, call, run, tool_events, write_policies
from tests.telemetry.conftest import otel

SHADOW_FORBID = INVARIANTS + """
@id("no-acme-vendor")
@mode("shadow")
@reason("ACME is no longer a vendor")
forbid(principal, action == Action::"oa__purchase_pay", resource)
when { context.args.vendor == "ACME" };
"""

DENY_ALL = """\
@id("nothing")
forbid(principal, action, resource);
"""


def pre_deny(event: dict[str, Any]) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": "vendor frozen"}}


def pre_ask(event: dict[str, Any]) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask",
                                   "permissionDecisionReason": "a person should look"}}


def pre_raise(event: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError("the shadow hook broke")


async def pre_hang(event: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(30)
    return {}


def the_agent(hooks: list[Any], **declared: Any) -> Agent:
    return Agent(id="buyer", name="Purchasing agent", instructions="buy", tools=list(TOOLS),
                 org_id="acme", owner_user_id="alice",
                 model_config_json={"hooks": {"class_hooks": [*hooks, "audit_log"],
                                              **declared}})


def cedar(path: Path, **entry: Any) -> dict[str, Any]:
    return {"name": "cedar_policy", "params": {"policies": str(path), "default": "deny"},
            **entry}


async def audit_details(db: Database) -> list[tuple[str, str | None, str | None]]:
    t = ConnectorCallLog
    async with db.engine.connect() as conn:
        rows = (await conn.execute(select(t.outcome, t.blocked_by, t.detail)
                                   .order_by(t.id))).all()
    return [(r.outcome, r.blocked_by, r.detail) for r in rows]


__all__ = ["otel"]


@pytest.fixture(autouse=True)
def _paid() -> None:
    PAID.clear()


async def test_a_shadow_cedar_policy_records_a_deny_and_the_call_runs(pdb, folder) -> None:
    write_policies(folder, SHADOW_FORBID)
    before = len(await audit_details(pdb))
    r = await run(pdb, the_agent([cedar(folder)]),
                  call("oa__purchase_pay", amount=10, vendor="ACME"))

    assert [e["type"] for e in tool_events(r)] == ["tool_result"]
    assert PAID == [{"amount": 10, "vendor": "ACME"}]
    effects = tool_events(r)[0]["side_effects"]
    assert any("shadow policy no-acme-vendor: would deny" in s for s in effects), effects
    (outcome, _, detail), = (await audit_details(pdb))[before:]
    assert outcome == "ok"
    assert "shadow policy no-acme-vendor: would deny" in str(detail)
    assert "ACME is no longer a vendor" in str(detail)


async def test_a_shadow_cedar_policy_records_an_allow_where_it_does_not_apply(pdb, folder
                                                                             ) -> None:
    write_policies(folder, SHADOW_FORBID)
    r = await run(pdb, the_agent([cedar(folder)]),
                  call("oa__purchase_pay", amount=10, vendor="Globex"))

    effects = tool_events(r)[0]["side_effects"]
    assert any("shadow policy no-acme-vendor: would allow" in s for s in effects), effects


async def test_a_shadow_policy_set_that_denies_everything_changes_nothing(pdb, folder) -> None:
    write_policies(folder, DENY_ALL)
    before = len(await audit_details(pdb))
    r = await run(pdb, the_agent([cedar(folder, mode="shadow")]),
                  call("crm__lookup", customer="bob"),
                  call("oa__purchase_pay", amount=10, vendor="ACME"))

    assert [e["type"] for e in tool_events(r)] == ["tool_result", "tool_result"]
    assert PAID == [{"amount": 10, "vendor": "ACME"}]
    rows = (await audit_details(pdb))[before:]
    assert [o for o, _, _ in rows] == ["ok", "ok"]
    assert all("shadow hook cedar_policy: would deny" in str(d) for _, _, d in rows), rows
    # The enforcing decision the audit row names is none: the shadow set decided nothing.
    assert all("policy deny" not in str(d).split("shadow")[0] for _, _, d in rows)


async def test_a_blocked_call_records_the_shadow_decision_after_the_block(pdb, folder) -> None:
    write_policies(folder, SHADOW_FORBID)
    before = len(await audit_details(pdb))
    r = await run(pdb, the_agent([cedar(folder)]), call("oa__purchase_pay", amount=10,
                                                        vendor="ACME"), user="bob", org="ro")

    assert [e["type"] for e in tool_events(r)] == ["tool_blocked"]
    (outcome, blocked_by, detail), = (await audit_details(pdb))[before:]
    assert (outcome, blocked_by) == ("blocked", "cedar_policy")
    assert "read-only" in str(detail)
    assert "shadow policy no-acme-vendor: would deny" in str(detail)


@pytest.mark.parametrize(("function", "verdict", "why"), [
    ("pre_deny", "deny", "vendor frozen"),
    ("pre_ask", "ask", "a person should look"),
    ("pre_raise", "deny", "it failed (RuntimeError)"),
    ("pre_hang", "deny", "it timed out after 0.2s"),
])
async def test_a_declared_hook_in_shadow_mode_records_and_never_decides(
        pdb, folder, function: str, verdict: str, why: str) -> None:
    write_policies(folder, INVARIANTS)
    hook = {"event": "PreToolUse", "matcher": "oa__purchase_pay", "mode": "shadow",
            "name": "freeze", "timeout": 0.2, "function": f"{__name__}:{function}"}
    before = len(await audit_details(pdb))
    r = await run(pdb, the_agent([cedar(folder)], python_hooks=[hook]),
                  call("oa__purchase_pay", amount=10, vendor="ACME"),
                  call("crm__lookup", customer="bob"))

    assert [e["type"] for e in tool_events(r)] == ["tool_result", "tool_result"]
    assert PAID == [{"amount": 10, "vendor": "ACME"}]
    rows = (await audit_details(pdb))[before:]
    assert f"shadow hook freeze: would {verdict}" in str(rows[0][2]), rows
    assert why in str(rows[0][2]), rows
    # Its matcher holds in shadow mode too: the lookup is not its call.
    assert "shadow" not in str(rows[1][2])


async def test_the_same_hook_enforcing_decides(pdb, folder) -> None:
    write_policies(folder, INVARIANTS)
    hook = {"event": "PreToolUse", "matcher": "oa__purchase_pay", "name": "freeze",
            "function": f"{__name__}:pre_deny"}
    r = await run(pdb, the_agent([cedar(folder)], python_hooks=[hook]),
                  call("oa__purchase_pay", amount=10, vendor="ACME"))

    assert [e["type"] for e in tool_events(r)] == ["tool_blocked"]
    assert PAID == []


@pytest.mark.parametrize("mode", ["Shadow", "observe", 1])
async def test_a_mode_other_than_enforce_or_shadow_is_refused(pdb, folder, mode) -> None:
    from hookgate.catalog.build import build_registry

    write_policies(folder, INVARIANTS)
    with pytest.raises(HookBuildError, match="'mode' must be 'enforce' or 'shadow'"):
        build_registry(the_agent([cedar(folder, mode=mode)]), HookServices(database=pdb))


async def test_a_cedar_mode_other_than_enforce_or_shadow_does_not_load(folder) -> None:
    from hookgate.policies import PolicyLoadError
    from hookgate.policies.live import LivePolicySet

    write_policies(folder, SHADOW_FORBID.replace('@mode("shadow")', '@mode("log_only")'))
    with pytest.raises(PolicyLoadError, match="@mode must be"):
        LivePolicySet(folder, "deny", TOOLS)


async def test_shadow_to_enforce_is_a_stamped_reload(pdb, folder) -> None:
    write_policies(folder, SHADOW_FORBID)
    reload_policies(folder, "deny", TOOLS)
    agent = the_agent([cedar(folder)])
    r = await run(pdb, agent, call("oa__purchase_pay", amount=10, vendor="ACME"))
    assert [e["type"] for e in tool_events(r)] == ["tool_result"]

    write_policies(folder, SHADOW_FORBID.replace('@mode("shadow")\n', ""))
    reload_policies(folder, "deny", TOOLS)
    deadline = time.monotonic() + 30
    while True:  # every process takes a stamped set within about a second
        r = await run(pdb, agent, call("oa__purchase_pay", amount=10, vendor="ACME"))
        if tool_events(r)[0]["type"] == "tool_blocked" or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert tool_events(r)[0]["type"] == "tool_blocked"
    assert "ACME is no longer a vendor" in tool_events(r)[0]["observation"]


async def test_each_shadow_decision_is_a_span_attribute_and_a_metric_per_rule(
        pdb, folder, otel) -> None:
    write_policies(folder, SHADOW_FORBID)
    hook = {"event": "PreToolUse", "matcher": "oa__purchase_pay", "mode": "shadow",
            "name": "freeze", "function": f"{__name__}:pre_ask"}
    await run(pdb, the_agent([cedar(folder)], python_hooks=[hook]),
              call("oa__purchase_pay", amount=10, vendor="ACME"),
              call("oa__purchase_pay", amount=10, vendor="Globex"))

    said = [tuple(s.attributes.get(SPAN_ATTRIBUTE) or ())
            for s in otel.named("hookgate.hook cedar_policy")]
    assert said == [("policy no-acme-vendor=deny",), ("policy no-acme-vendor=allow",)]
    said = [tuple(s.attributes.get(SPAN_ATTRIBUTE) or ())
            for s in otel.named("hookgate.hook freeze")]
    assert said == [("hook freeze=ask",), ("hook freeze=ask",)]
    counted = {(p.attributes[metrics.SHADOW_RULE], p.attributes[metrics.SHADOW_VERDICT]):
               p.value for p in otel.points(metrics.M_SHADOW)}
    assert counted == {("policy no-acme-vendor", "would_deny"): 1,
                       ("policy no-acme-vendor", "would_allow"): 1,
                       ("hook freeze", "would_ask"): 2}


async def test_shadow_mode_on_a_post_tool_use_hook_is_refused(pdb, folder) -> None:
    from hookgate.catalog.build import build_registry

    write_policies(folder, INVARIANTS)
    hook = {"event": "PostToolUse", "mode": "shadow", "function": f"{__name__}:pre_deny"}
    with pytest.raises(HookBuildError, match="shadow mode is for PreToolUse hooks"):
        build_registry(the_agent([cedar(folder)], python_hooks=[hook]),
                       HookServices(database=pdb))


@pytest.mark.both_databases
async def test_shadow_decisions_reach_the_audit_row_on_each_backend(db, folder) -> None:
    from hookgate.storage.orgs import sync_orgs
    from hookgate.storage.users import DeclaredUser, sync_declared_users

    await sync_orgs(db, [("acme", "ACME", False), ("ro", "Read-only Co", True)])
    await sync_declared_users(db, [DeclaredUser("alice", "acme", admin=True),
                                   DeclaredUser("bob", "ro")])
    write_policies(folder, SHADOW_FORBID)
    hook = {"event": "PreToolUse", "mode": "shadow", "name": "freeze",
            "function": f"{__name__}:pre_raise"}
    await run(db, the_agent([cedar(folder)], python_hooks=[hook]),
              call("oa__purchase_pay", amount=10, vendor="ACME"))
    await run(db, the_agent([cedar(folder)], python_hooks=[hook]),
              call("oa__purchase_pay", amount=10, vendor="ACME"), user="bob", org="ro")

    rows = await audit_details(db)
    assert [(o, b) for o, b, _ in rows] == [("ok", None), ("blocked", "cedar_policy")]
    for _, _, detail in rows:
        assert "shadow hook freeze: would deny (it failed (RuntimeError))" in str(detail)
        assert "shadow policy no-acme-vendor: would deny" in str(detail)
    assert PAID == [{"amount": 10, "vendor": "ACME"}]
