"""Property: rules in shadow mode never change a call, and each records what it would have
decided. Over 10,000 generated calls (hypothesis), the PreToolUse chain of an agent built by
the real registry builder with its enforcing rules, and of the same agent with shadow rules
added — two ``@mode("shadow")`` Cedar policies, a catalog-style hook and a declared python
hook in shadow mode that deny, ask, rewrite the arguments, raise or hang — give the same
outcome (allowed or blocked, by whom, the error, the arguments, who asked for a person), and
the shadowed chain records one decision per shadow item."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from hookgate import Agent
from hookgate.catalog.build import build_registry
from hookgate.catalog.builtin.cedar_policy import CedarPolicy, Principal, UnknownPrincipal
from hookgate.hooks.model import HookContext, HookPoint, HookResult, PreToolUseHook
from hookgate.hooks.registry import HookRegistry
from hookgate.hooks.services import HookServices
from hookgate.storage.database import Database
from hookgate.tools.calls import CallIdentity, ToolCall
from hookgate.tools.guarded import build_metadata
from tests.policies.fixtures import _prepare
from tests.policies.world import INVARIANTS, TOOLS, write_policies

ENFORCED = INVARIANTS + """
@id("members-few-units")
@reason("members order at most 5 units")
forbid(principal, action == Action::"oa__purchase_pay", resource)
when { principal.role != "admin" && context.args has units && context.args.units > 5 };
"""
SHADOW_POLICIES = """
@id("shadow-no-acme")
@mode("shadow")
@reason("ACME is no longer a vendor")
forbid(principal, action == Action::"oa__purchase_pay", resource)
when { context.args.vendor == "ACME" };

@id("shadow-ask-mid")
@mode("shadow")
@ask("mid-sized payments need a look")
permit(principal, action == Action::"oa__purchase_pay", resource)
when { context.args.amount.greaterThan(decimal("1000.0")) };
"""
CALLS_PER_EXAMPLE = 100
EXAMPLES = int(os.environ.get("SHADOW_EXAMPLES", 100))  # 10,000 calls
SEEN: Counter[str] = Counter()


def _roll(args: dict[str, Any], salt: str) -> int:
    text = json.dumps(args, sort_keys=True, default=repr) + salt
    return hashlib.sha256(text.encode()).digest()[0] % 6


class Dice(PreToolUseHook):
    """A hook that denies, asks, rewrites, raises or mutates its context by the arguments."""

    name = "dice"
    priority = 50

    async def execute(self, ctx: HookContext) -> HookResult:
        roll = _roll(ctx.tool_args, "dice")
        if roll == 0:
            return HookResult(allow=False, error="dice says no")
        if roll == 1:
            ctx.ask_for_confirmation("dice", "dice wants a person")
            return HookResult()
        if roll == 2:
            ctx.tool_args["vendor"] = "Rewritten"  # in place: must stay in the copy
            ctx.stop_run = "dice stops the run"
            return HookResult(modified_args={**ctx.tool_args, "amount": 1})
        if roll == 3:
            raise RuntimeError("dice broke")
        if roll == 4:
            return "not a HookResult"  # type: ignore[return-value]
        return HookResult(side_effects=["dice rolled"])


async def loaded_dice(event: dict[str, Any]) -> dict[str, Any] | None:
    roll = _roll(event.get("tool_input") or {}, "python")
    if roll in (0, 1):
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                       "permissionDecision": "deny" if roll == 0 else "ask",
                                       "permissionDecisionReason": "python dice"}}
    if roll == 2:
        raise ValueError("python dice broke")
    if roll == 3 and _roll(event.get("tool_input") or {}, "hang") == 0:
        await asyncio.sleep(5)  # past its timeout
    return None


async def enforcing_gate(event: dict[str, Any]) -> dict[str, Any] | None:
    args = event.get("tool_input") or {}
    if args.get("vendor") == "Blocked":
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                       "permissionDecision": "deny",
                                       "permissionDecisionReason": "vendor blocked"}}
    if args.get("memo") == "ask":
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                       "permissionDecision": "ask",
                                       "permissionDecisionReason": "memo asks"}}
    return None


def agent(folder: Path, shadow: bool) -> Agent:
    class_hooks: list[Any] = [{"name": "cedar_policy",
                               "params": {"policies": str(folder), "default": "deny"}},
                              "audit_log"]
    python_hooks: list[Any] = [{"event": "PreToolUse", "name": "gate",
                                "function": f"{__name__}:enforcing_gate"}]
    if shadow:
        class_hooks.append({"name": f"{__name__}:Dice", "mode": "shadow"})
        python_hooks.append({"event": "PreToolUse", "name": "python_dice", "mode": "shadow",
                             "timeout": 0.01, "function": f"{__name__}:loaded_dice"})
    return Agent(id="buyer", name="Purchasing agent", instructions="buy", tools=list(TOOLS),
                 org_id="acme", owner_user_id="alice",
                 model_config_json={"hooks": {"class_hooks": class_hooks,
                                              "python_hooks": python_hooks}})


PEOPLE = {("alice", "acme"): Principal(admin=True, org_read_only=False),
          ("bob", "ro"): Principal(admin=False, org_read_only=True)}


async def principal(user: str, org: str) -> Principal:
    """The fixtures' database, read once: the property is about shadow rules, and 10,000
    calls of database reads would only slow it down (tests/policies/test_shadow.py reads
    the real database)."""
    found = PEOPLE.get((user, org))
    if found is None:
        raise UnknownPrincipal(f"user '{user}' is not an active user in the database")
    return found


def chain(the_agent: Agent, db: Database) -> HookRegistry:
    registry = build_registry(the_agent, HookServices(database=db))
    registry.unregister("approval_gate")  # a person's answer is not what is compared
    cedar = registry.get("cedar_policy")
    assert isinstance(cedar, CedarPolicy)
    cedar.principal = principal
    return registry


def context(the_agent: Agent, user: str, org: str, tool: str, args: dict[str, Any]
            ) -> HookContext:
    identity = CallIdentity(agent_id=the_agent.id, user_id=user, org_id=org, run_id="prop",
                            execution_path="react")
    found = next(t for t in the_agent.tools if t.name == tool)
    metadata = build_metadata(identity, ToolCall("c1", tool, args), found,
                              found.writes and "amount" in args
                              and isinstance(args["amount"], int | float)
                              and args["amount"] > 50_000)
    return HookContext(hook_point=HookPoint.PRE_TOOL_USE, tool_name=tool,
                       tool_args=json.loads(json.dumps(args)), agent_id=the_agent.id,
                       user_id=user, metadata=metadata)


_VERSION = re.compile(r"cedar-[0-9a-f]{12}")


def outcome(result: Any, ctx: HookContext) -> dict[str, Any]:
    """What the call's fate is made of (the policy set's version aside: the shadowed files
    hold more policies, so their digest differs)."""
    return {"allow": result.allow, "blocked_by": result.blocked_by,
            "error": _VERSION.sub("V", str(result.error)), "args": ctx.tool_args,
            "modified_args": result.modified_args, "failed_closed": result.failed_closed,
            "asked_by": [(a.hook, _VERSION.sub("V", str(a.reason))) for a in ctx.asked_by],
            "stop_run": ctx.stop_run, "added_context": ctx.added_context,
            "policy": _VERSION.sub("V", str(ctx.policy_decision))}


calls = st.fixed_dictionaries({
    "who": st.sampled_from([("alice", "acme"), ("bob", "ro"), ("mallory", "acme")]),
    "tool": st.sampled_from(["oa__purchase_pay", "oa__purchase_pay", "crm__lookup"]),
    "amount": st.one_of(st.integers(-10, 200_000), st.floats(allow_nan=True),
                        st.sampled_from(["12", "lots", None, True, 2**70])),
    "vendor": st.one_of(st.sampled_from(["ACME", "Globex", "Blocked", "Initech"]),
                        st.text(max_size=5), st.integers()),
    "units": st.one_of(st.none(), st.integers(0, 9), st.sampled_from(["3", 2.5])),
    "memo": st.one_of(st.none(), st.sampled_from(["ask", "for Q3", ""])),
})


def arguments(call: dict[str, Any]) -> dict[str, Any]:
    if call["tool"] == "crm__lookup":
        return {"customer": call["vendor"]}
    args = {"amount": call["amount"], "vendor": call["vendor"]}
    for key in ("units", "memo"):
        if call[key] is not None:
            args[key] = call[key]
    return args


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("shadow-property")
    url = f"sqlite+aiosqlite:///{base / 'hookgate.db'}"
    loop = asyncio.new_event_loop()
    loop.run_until_complete(_prepare(url))
    db = Database(url)
    plain = agent(write_policies(base / "plain", ENFORCED), shadow=False)
    shadowed = agent(write_policies(base / "shadowed", ENFORCED + SHADOW_POLICIES), shadow=True)
    try:
        yield {"loop": loop, "plain": (plain, chain(plain, db)),
               "shadowed": (shadowed, chain(shadowed, db))}
    finally:
        loop.run_until_complete(db.dispose())
        loop.close()


@pytest.mark.timeout(900)  # 10,000 calls through two chains on a busy machine
def test_shadow_rules_never_change_a_call_and_each_records_its_decision(world) -> None:
    SEEN.clear()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck),
              phases=[Phase.explicit, Phase.generate])
    @given(st.lists(calls, min_size=CALLS_PER_EXAMPLE, max_size=CALLS_PER_EXAMPLE))
    def check(batch: list[dict[str, Any]]) -> None:
        world["loop"].run_until_complete(compare(world, batch))

    check()
    assert SEEN["calls"] >= EXAMPLES * CALLS_PER_EXAMPLE, SEEN
    # The generated calls reach every verdict of every shadow item, and both outcomes.
    for verdict in ("allow", "deny", "ask"):
        for rule in ("hook dice", "hook python_dice", "policy shadow-no-acme"):
            if (rule, verdict) in (("policy shadow-no-acme", "ask"),):
                continue
            assert SEEN[f"{rule}: would {verdict}"] > 0, (rule, verdict, SEEN)
    assert SEEN["policy shadow-ask-mid: would ask"] > 0
    assert SEEN["allowed"] > 0 and SEEN["blocked"] > 0 and SEEN["asked"] > 0


async def compare(world: dict[str, Any], batch: list[dict[str, Any]]) -> None:
    for call in batch:
        user, org = call["who"]
        args = arguments(call)
        results = {}
        for kind in ("plain", "shadowed"):
            the_agent, registry = world[kind]
            ctx = context(the_agent, user, org, call["tool"], args)
            results[kind] = (outcome(await registry.run_pre_tool_use(ctx), ctx), ctx)
        (plain, _), (shadowed, ctx) = results["plain"], results["shadowed"]
        assert shadowed == plain, (call, plain, shadowed)
        # One decision per shadow item: the two hooks always (they run first), the two
        # shadow policies whenever the enforcing Cedar hook ran.
        notes = ctx.shadow_decisions
        rules = [n.split(":")[0] for n in notes]
        expected = ["shadow hook dice", "shadow hook python_dice"]
        if ctx.policy_decision is not None:
            expected += ["shadow policy shadow-no-acme", "shadow policy shadow-ask-mid"]
        assert sorted(rules) == sorted(expected), (call, notes)
        for note in notes:
            SEEN[note.removeprefix("shadow ").split(" (")[0]] += 1
        SEEN["calls"] += 1
        SEEN["allowed" if plain["allow"] and not plain["asked_by"] else
             "blocked" if not plain["allow"] else "asked"] += 1
