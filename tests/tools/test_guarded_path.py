"""The one guarded path (SPEC §2): nothing runs for an unknown tool or bad arguments, the
hooks see the request facts, a call that needs a person never runs unapproved, and a tool
call runs at most once per (run, tool call id)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from hookgate import HookContext, HookRegistry, HookResult, PreToolUseHook, build_registry
from hookgate.hooks import HookPoint
from hookgate.tools import (
    CallIdentity,
    InMemoryLedger,
    Tool,
    ToolCall,
    ToolOutcome,
    execute_tool_call,
)
from hookgate.tools.guarded_call import new_call
from tests.hookfixtures import agent_with, pay_tool

SPEC_METADATA_KEYS = {
    "org_id", "conversation_id", "run_id", "tool_call_id", "requires_confirmation",
    "connector", "writes", "execution_path", "parent_agent_id", "depth",
}


class Witness(PreToolUseHook):
    """Records every context it is shown; optionally rewrites or edits the arguments."""

    name = "witness"

    def __init__(self, rewrite: dict[str, Any] | None = None,
                 edit_in_place: dict[str, Any] | None = None) -> None:
        self.seen: list[HookContext] = []
        self.rewrite, self.edit_in_place = rewrite, edit_in_place

    async def execute(self, ctx: HookContext) -> HookResult:
        self.seen.append(HookContext(ctx.hook_point, ctx.tool_name, dict(ctx.tool_args),
                                     agent_id=ctx.agent_id, user_id=ctx.user_id,
                                     metadata=dict(ctx.metadata)))
        if self.edit_in_place:
            ctx.tool_args.update(self.edit_in_place)
        if self.rewrite is not None:
            return HookResult(modified_args={**ctx.tool_args, **self.rewrite})
        return HookResult()


def identity(**overrides: Any) -> CallIdentity:
    fields: dict[str, Any] = {"agent_id": "buyer", "user_id": "alice", "org_id": "acme",
                              "run_id": "run_1"}
    return CallIdentity(**{**fields, **overrides})


async def guarded(tool: Tool, name: str, args: Any, registry: HookRegistry | None = None,
                  **kwargs: Any) -> ToolOutcome:
    who = kwargs.pop("identity", None) or identity()
    return await execute_tool_call(
        new_call(who, ToolCall("c1", name, args), {tool.name: tool}),
        registry=registry if registry is not None else HookRegistry(), **kwargs,
    )


# -- unknown tools ------------------------------------------------------------------------


@pytest.mark.parametrize("name", [
    "oa__purchase_refund",    # not a tool of this agent
    "OA__PURCHASE_PAY",       # case variant
    " oa__purchase_pay ",     # surrounding whitespace
    "оa__purchase_pay",       # Cyrillic "о" (U+043E) instead of Latin "o"
])
async def test_an_unknown_tool_name_runs_nothing_and_says_so(name: str) -> None:
    runs: list[dict[str, Any]] = []
    witness = Witness()
    pay = pay_tool(runs)

    outcome = await guarded(pay, name, {"amount": 1, "vendor": "ACME"}, HookRegistry([witness]))

    assert runs == []
    assert witness.seen == []
    assert not outcome.allowed
    assert outcome.status == "unknown_tool"
    assert outcome.observation.startswith(f"Error: unknown tool {name!r}.")
    assert "Available tools: oa__purchase_pay." in outcome.observation


async def test_a_homoglyph_tool_name_is_spelled_out_for_the_model() -> None:
    pay = pay_tool([])

    outcome = await guarded(pay, "оa__purchase_pay", {"amount": 1, "vendor": "ACME"})

    assert "non-ASCII" in outcome.observation
    assert "\\u043e" in outcome.observation


async def test_a_near_miss_tool_name_is_not_run_but_the_exact_name_is_suggested() -> None:
    pay = pay_tool([])

    outcome = await guarded(pay, "OA__Purchase_Pay", {"amount": 1, "vendor": "ACME"})

    assert outcome.status == "unknown_tool"
    assert "did you mean 'oa__purchase_pay'?" in outcome.observation


# -- invalid arguments --------------------------------------------------------------------


@pytest.mark.parametrize(("args", "complaint"), [
    ({"vendor": "ACME"}, "amount"),                                   # missing
    ({"amount": "a lot", "vendor": "ACME"}, "amount"),                # wrong type
    ({"amount": 1, "vendor": "ACME", "approved": True}, "approved"),  # unknown key
    (["amount", 1], "must be a JSON object, got list"),               # not an object
    (None, "must be a JSON object, got NoneType"),
])
async def test_invalid_arguments_run_nothing_and_the_model_is_told_why(
    args: Any, complaint: str
) -> None:
    runs: list[dict[str, Any]] = []
    witness = Witness()
    pay = pay_tool(runs)

    outcome = await guarded(pay, pay.name, args, HookRegistry([witness]))

    assert runs == []
    assert witness.seen == []
    assert not outcome.allowed
    assert outcome.status == "invalid"
    assert outcome.observation.startswith("Error: ")
    assert complaint in outcome.observation


async def test_a_hook_that_rewrites_arguments_into_invalid_ones_is_blocked() -> None:
    runs: list[dict[str, Any]] = []
    pay = pay_tool(runs)
    registry = HookRegistry([Witness(rewrite={"amount": "ten thousand"})])

    outcome = await guarded(pay, pay.name, {"amount": 1, "vendor": "ACME"}, registry)

    assert runs == []
    assert not outcome.allowed
    assert "a hook rewrote the arguments into invalid ones" in outcome.observation


async def test_a_hook_that_edits_arguments_in_place_is_validated_too() -> None:
    runs: list[dict[str, Any]] = []
    pay = pay_tool(runs)
    registry = HookRegistry([Witness(edit_in_place={"surprise": 1})])

    outcome = await guarded(pay, pay.name, {"amount": 1, "vendor": "ACME"}, registry)

    assert runs == []
    assert not outcome.allowed
    assert outcome.status == "invalid"
    assert "surprise" in outcome.observation


async def test_a_valid_rewrite_is_what_the_tool_receives() -> None:
    runs: list[dict[str, Any]] = []
    pay = pay_tool(runs)
    registry = HookRegistry([Witness(rewrite={"vendor": "ACME Corp (verified)"})])

    outcome = await guarded(pay, pay.name, {"amount": 7, "vendor": "acme"}, registry)

    assert runs == [{"amount": 7, "vendor": "ACME Corp (verified)"}]
    assert outcome.allowed
    assert outcome.args == {"amount": 7, "vendor": "ACME Corp (verified)"}
    assert outcome.observation == "paid 7 to ACME Corp (verified)"


# -- what hooks are told ------------------------------------------------------------------


async def test_the_hook_context_carries_every_request_fact_of_the_spec() -> None:
    witness = Witness()
    pay = pay_tool([])
    who = identity(conversation_id="conv_9", execution_path="delegate",
                   parent_agent_id="planner", depth=2)

    await guarded(pay, pay.name, {"amount": 3, "vendor": "ACME"}, HookRegistry([witness]),
                  identity=who)

    [ctx] = witness.seen
    assert ctx.hook_point is HookPoint.PRE_TOOL_USE
    assert (ctx.tool_name, ctx.tool_args) == ("oa__purchase_pay", {"amount": 3, "vendor": "ACME"})
    assert (ctx.agent_id, ctx.user_id) == ("buyer", "alice")
    assert set(ctx.metadata) >= SPEC_METADATA_KEYS
    assert {k: ctx.metadata[k] for k in SPEC_METADATA_KEYS} == {
        "org_id": "acme", "conversation_id": "conv_9", "run_id": "run_1",
        "tool_call_id": "c1", "requires_confirmation": False, "connector": "oa",
        "writes": True, "execution_path": "delegate", "parent_agent_id": "planner",
        "depth": 2,
    }


async def test_requires_confirmation_in_the_context_follows_the_tools_predicate() -> None:
    witness = Witness()
    pay = pay_tool([], requires_confirmation=lambda a: a["amount"] > 50_000)
    registry = HookRegistry([witness])

    await guarded(pay, pay.name, {"amount": 60_000, "vendor": "ACME"}, registry)
    await guarded(pay, pay.name, {"amount": 100, "vendor": "ACME"}, registry)

    assert [c.metadata["requires_confirmation"] for c in witness.seen] == [True, False]


# -- confirmation -------------------------------------------------------------------------


async def test_a_call_that_needs_confirmation_is_blocked_without_an_approval_service() -> None:
    runs: list[dict[str, Any]] = []
    pay = pay_tool(runs, requires_confirmation=lambda a: a["amount"] > 50_000)
    registry = build_registry(agent_with([pay]))

    big = await guarded(pay, pay.name, {"amount": 60_000, "vendor": "ACME"}, registry)
    small = await guarded(pay, pay.name, {"amount": 100, "vendor": "ACME"}, registry)

    assert not big.allowed
    assert big.blocked_by == "approval_gate"
    assert "approval" in big.observation
    assert small.allowed
    assert runs == [{"amount": 100, "vendor": "ACME"}]


async def test_an_agent_that_requires_confirmation_for_all_runs_nothing_unapproved() -> None:
    runs: list[dict[str, Any]] = []
    pay = pay_tool(runs)
    agent = agent_with([pay], require_confirmation_for_all=True)

    outcome = await guarded(pay, pay.name, {"amount": 1, "vendor": "ACME"},
                            build_registry(agent),
                            identity=identity(require_confirmation_for_all=True))

    assert runs == []
    assert not outcome.allowed
    assert outcome.blocked_by == "approval_gate"


async def test_a_hook_that_clears_the_confirmation_flag_cannot_wave_a_call_through() -> None:
    class Eraser(PreToolUseHook):
        name = "eraser"
        priority = 1

        async def execute(self, ctx: HookContext) -> HookResult:
            # The metadata is read-only; the facts underneath are the engine's copy.
            with contextlib.suppress(TypeError):
                ctx.metadata["requires_confirmation"] = False  # type: ignore[index]
            ctx.facts["requires_confirmation"] = False
            ctx.asked_by.clear()
            return HookResult()

    runs: list[dict[str, Any]] = []
    pay = pay_tool(runs, requires_confirmation=True)
    registry = build_registry(agent_with([pay]))
    registry.register(Eraser())

    outcome = await guarded(pay, pay.name, {"amount": 1, "vendor": "ACME"}, registry)

    assert runs == []
    assert not outcome.allowed
    assert "requires a person's approval" in outcome.observation


# -- at most once -------------------------------------------------------------------------


async def test_the_same_tool_call_runs_at_most_once_and_the_stored_observation_returns() -> None:
    runs: list[dict[str, Any]] = []
    pay = pay_tool(runs)
    ledger = InMemoryLedger()
    args = {"amount": 5, "vendor": "ACME"}

    first = await guarded(pay, pay.name, args, ledger=ledger)
    again = await guarded(pay, pay.name, args, ledger=ledger)
    other_run = await guarded(pay, pay.name, args, ledger=ledger,
                              identity=identity(run_id="run_2"))

    assert runs == [args, args]  # once for run_1, once for run_2
    assert first.observation == again.observation == "paid 5 to ACME"
    assert again.allowed and again.status == "ok"
    assert other_run.observation == "paid 5 to ACME"


async def test_a_call_claimed_before_an_interruption_is_not_run_again() -> None:
    runs: list[dict[str, Any]] = []
    pay = pay_tool(runs)
    ledger = InMemoryLedger()
    # The process died after claiming the call and before the tool's result was stored.
    await ledger.claim("run_1", "c1", pay.name, "digest")

    outcome = await guarded(pay, pay.name, {"amount": 5, "vendor": "ACME"}, ledger=ledger)

    assert runs == []
    assert outcome.status == "error"
    assert "not run a second time" in outcome.observation
