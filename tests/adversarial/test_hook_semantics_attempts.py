"""Python semantics hold in the registry: what a hook's instance says (should_trigger,
timeout, fail_mode, priority — set before or after registration, or computed by a
property) is what runs, and the fast loop for plain hooks answers exactly like the full one
for every kind of answer a hook can give."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from hookgate import (
    HookContext,
    HookPoint,
    HookRegistry,
    HookResult,
    PostToolUseHook,
    PreToolUseHook,
    ReActEngine,
    ScriptedLLM,
)
from tests.adversarial.conftest import Tally
from tests.engines.world import Bank, make_agent


class Guard(PreToolUseHook):
    """Blocks whatever it triggers on; fails (raises) when told to."""

    name = "guard"
    fail_mode = "open"

    def __init__(self, raises: bool = False, sleep: float = 0) -> None:
        self.raises, self.sleep, self.ran = raises, sleep, 0

    async def execute(self, ctx: HookContext) -> HookResult:
        self.ran += 1
        if self.sleep:
            await asyncio.sleep(self.sleep)
        if self.raises:
            raise RuntimeError("policy service down")
        return HookResult(allow=False, error=f"Blocked by guard: {ctx.tool_name}")


def ctx(tool: str = "pay") -> HookContext:
    return HookContext(HookPoint.PRE_TOOL_USE, tool_name=tool, tool_args={"a": 1})


@pytest.mark.parametrize("when", ["before", "after"])
async def test_should_trigger_set_on_the_instance_is_honoured(when: str,
                                                              attempt: Tally) -> None:
    guard = Guard()
    registry = HookRegistry([] if when == "before" else [guard])
    guard.should_trigger = lambda c: c.tool_name == "pay"  # type: ignore[method-assign]
    if when == "before":
        registry.register(guard)
    pay, quote = (await registry.run_pre_tool_use(ctx("pay")),
                  await registry.run_pre_tool_use(ctx("quote")))
    attempt.record(f"instance should_trigger ignored ({when} registration)", pay.allow)
    assert not pay.allow and quote.allow and guard.ran == 1


@pytest.mark.parametrize("when", ["before", "after"])
async def test_timeout_set_on_the_instance_is_honoured(when: str, attempt: Tally) -> None:
    guard = Guard(sleep=3600)
    guard.fail_mode = "closed"
    registry = HookRegistry([] if when == "before" else [guard])
    guard.timeout = 0.05
    if when == "before":
        registry.register(guard)
    result = await cut_off_within_a_minute(registry)  # the guard would sleep an hour
    attempt.record(f"instance timeout ignored ({when} registration)", result is None)
    assert result is not None
    assert not result.allow and "timed out after 0.05s" in (result.error or "")


@pytest.mark.parametrize("when", ["before", "after"])
async def test_fail_mode_set_on_the_instance_is_honoured(when: str, attempt: Tally) -> None:
    guard = Guard(raises=True)  # the class fails open
    registry = HookRegistry([] if when == "before" else [guard])
    guard.fail_mode = "closed"
    if when == "before":
        registry.register(guard)
    result = await registry.run_pre_tool_use(ctx())
    attempt.record(f"instance fail_mode ignored ({when} registration)", result.allow)
    assert not result.allow and result.failed_closed and result.blocked_by == "guard"
    guard.fail_mode = "open"  # and back: the registry follows every assignment
    assert (await registry.run_pre_tool_use(ctx())).allow


async def test_computed_timeout_and_fail_mode_are_read_on_every_call(attempt: Tally) -> None:
    class Moody(Guard):
        closed = True

        @property
        def fail_mode(self) -> Any:  # type: ignore[override]
            return "closed" if Moody.closed else "open"

        @property
        def timeout(self) -> Any:  # type: ignore[override]
            return 0.05

    hook = Moody(raises=True)
    registry = HookRegistry([hook])
    first = await registry.run_pre_tool_use(ctx())
    Moody.closed = False
    second = await registry.run_pre_tool_use(ctx())
    attempt.record("computed fail_mode read once", first.allow)
    assert not first.allow and second.allow
    slow = Moody(sleep=3600)
    slow.name = "slow"
    result = await cut_off_within_a_minute(HookRegistry([slow]))
    attempt.record("computed timeout ignored", result is None)
    assert result is not None and result.allow  # open, timed out


async def cut_off_within_a_minute(registry: HookRegistry) -> HookResult | None:
    """The registry's answer, or None if it had none within a minute (a guard sleeping an
    hour that its timeout did not cut off)."""
    try:
        async with asyncio.timeout(60):
            return await registry.run_pre_tool_use(ctx())
    except TimeoutError:
        return None


async def test_priority_changed_after_registration_reorders_the_chain() -> None:
    order: list[str] = []

    class Step(PreToolUseHook):
        def __init__(self, name: str, priority: int) -> None:
            self.name, self.priority = name, priority

        async def execute(self, c: HookContext) -> HookResult:
            order.append(self.name)
            return HookResult()

    a, b = Step("a", 1), Step("b", 2)
    registry = HookRegistry([a, b])
    a.priority = 3
    await registry.run_pre_tool_use(ctx())
    assert order == ["b", "a"] and [h.name for h in registry.hooks()] == ["b", "a"]


async def test_two_hooks_sharing_one_callable_each_run_once_under_their_own_name() -> None:
    calls: list[str] = []

    async def shared(c: HookContext) -> HookResult:
        calls.append("x")
        if len(calls) == 2:
            raise RuntimeError("second one fails")
        return HookResult()

    first, second = Guard(), Guard()
    first.name, second.name = "first", "second"
    first.fail_mode = second.fail_mode = "closed"
    first.execute = second.execute = shared  # type: ignore[method-assign]
    result = await HookRegistry([first, second]).run_pre_tool_use(ctx())
    assert calls == ["x", "x"]
    assert not result.allow and result.blocked_by == "second"


class NarrowGuard(Guard):
    """Narrowed on its instance (not its class) to the tool that writes notes."""

    def __init__(self) -> None:
        super().__init__()
        self.should_trigger = lambda c: c.tool_name == "db__write_note"  # type: ignore[method-assign]


async def test_an_instance_trigger_holds_on_the_guarded_path_of_a_react_run(
        attempt: Tally) -> None:
    bank = Bank()
    engine = ReActEngine(ScriptedLLM([
        {"tool_calls": [{"name": "db__write_note", "args": {"text": "x"}},
                        {"name": "oa__quote", "args": {"vendor": "A"}}]},
        {"answer": "done"}]))
    await engine.run(make_agent(bank, "buyer", f"{__name__}:NarrowGuard"), "go")
    attempt.record("instance trigger ignored on a react run", bool(bank.notes))
    assert bank.notes == [] and bank.quotes == 1


# -- the fast loop answers exactly like the full loop ---------------------------------------

class _Exotic(HookResult):
    """A HookResult subclass (allowed: it is a HookResult)."""


ANSWERS: dict[str, Any] = {
    "allow": lambda: HookResult(),
    "block": lambda: HookResult(allow=False, error="no"),
    "block without a reason": lambda: HookResult(allow=False),
    "rewrite": lambda: HookResult(modified_args={"a": 2}),
    "bad rewrite": lambda: HookResult(modified_args=["not", "a", "dict"]),  # type: ignore[arg-type]
    "side effect": lambda: HookResult(side_effects=["noted"]),
    "subclass": lambda: _Exotic(),
    "dict": lambda: {"allow": False},
    "none": lambda: None,
    "returns an exception": lambda: RuntimeError("returned, not raised"),
    "raises": lambda: (_ for _ in ()).throw(RuntimeError("raised")),
    "post rewrite": lambda: HookResult(modified_result="rewritten"),
}


def _hook(base: type, name: str, answer: str) -> Any:
    async def execute(self: Any, c: HookContext) -> Any:
        return ANSWERS[answer]()

    cls = type(f"H_{name}", (base,), {"name": name, "execute": execute})
    return cls()


def _forcing_full_loop(base: type) -> Any:
    # A no-op hook with a timeout: its presence makes the registry take the full loop.
    hook = _hook(base, "zz_full", "allow")
    hook.timeout = 100
    hook.priority = 10_000
    return hook


def _summary(result: Any, context: HookContext) -> dict[str, Any]:
    trace = [e for e in result.trace if e["hook"] != "zz_full"]
    return {"allow": result.allow, "error": result.error, "args": context.tool_args,
            "modified_args": result.modified_args, "modified_result": result.modified_result,
            "observation": context.tool_result, "withheld": result.withheld,
            "blocked_by": result.blocked_by, "side_effects": list(result.side_effects),
            "trace": trace}


@pytest.mark.parametrize("point", [HookPoint.PRE_TOOL_USE, HookPoint.POST_TOOL_USE])
async def test_the_fast_loop_answers_like_the_full_loop_for_every_answer(
        point: HookPoint, attempt: Tally) -> None:
    base = PreToolUseHook if point is HookPoint.PRE_TOOL_USE else PostToolUseHook
    differ = []
    for first, second in itertools.product(ANSWERS, repeat=2):
        answers = {}
        for full in (False, True):
            hooks = [_hook(base, "one", first), _hook(base, "two", second)]
            if full:
                hooks.append(_forcing_full_loop(base))
            registry = HookRegistry(hooks)
            context = HookContext(point, tool_name="t", tool_args={"a": 1},
                                  tool_result="raw")
            run = (registry.run_pre_tool_use if point is HookPoint.PRE_TOOL_USE
                   else registry.run_post_tool_use)
            answers[full] = _summary(await run(context), context)
        if answers[False] != answers[True]:
            differ.append((first, second, answers))
    attempt.record(f"fast loop changes a hook's meaning at {point.value}", bool(differ))
    assert differ == []
