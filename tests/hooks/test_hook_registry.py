"""The hook registry's promises (SPEC §1): order, chaining, the first block wins, and a hook
that fails stops what it guards unless it says ``fail_mode="open"``."""

from __future__ import annotations

import asyncio
import json
import time
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
    SessionStartHook,
)
from hookgate.hooks import DuplicateHookError, HookError
from hookgate.tools import CallIdentity, ToolCall, execute_tool_call
from hookgate.tools.guarded_call import new_call
from tests.hookfixtures import (
    FAILURES,
    MisbehavingPost,
    MisbehavingPre,
    MisbehavingSessionStart,
    agent_with,
    pay_tool,
)

PAY = {"name": "oa__purchase_pay", "args": {"amount": 120, "vendor": "ACME"}, "id": "c1"}


class Step(PreToolUseHook):
    """Writes its name to ``log`` and answers ``result`` (default: allow, change nothing)."""

    def __init__(self, name: str, log: list[str], priority: int = 100,
                 result: HookResult | None = None, trigger: bool = True) -> None:
        self.name, self.log, self.priority = name, log, priority
        self.result, self.trigger = result, trigger

    def should_trigger(self, ctx: HookContext) -> bool:
        return self.trigger

    async def execute(self, ctx: HookContext) -> HookResult:
        self.log.append(self.name)
        return self.result or HookResult()


class PostStep(PostToolUseHook):
    def __init__(self, name: str, log: list[str], result: HookResult | None = None,
                 priority: int = 100) -> None:
        self.name, self.log, self.result, self.priority = name, log, result, priority

    async def execute(self, ctx: HookContext) -> HookResult:
        self.log.append(self.name)
        return self.result or HookResult()


class SessionStep(SessionStartHook):
    def __init__(self, name: str, log: list[str], result: HookResult | None = None) -> None:
        self.name, self.log, self.result = name, log, result

    async def execute(self, ctx: HookContext) -> HookResult:
        self.log.append(self.name)
        return self.result or HookResult()


def pre_ctx(**args: Any) -> HookContext:
    return HookContext(HookPoint.PRE_TOOL_USE, tool_name="oa__purchase_pay", tool_args=args,
                       agent_id="buyer", metadata={"run_id": "r1", "tool_call_id": "c1"})


def identity() -> CallIdentity:
    return CallIdentity(agent_id="buyer", user_id="alice", org_id="acme", run_id="r1")


# -- order --------------------------------------------------------------------------------


async def test_hooks_run_in_priority_order_lower_first() -> None:
    log: list[str] = []
    registry = HookRegistry([Step("late", log, 300), Step("early", log, 1), Step("mid", log, 50)])

    await registry.run_pre_tool_use(pre_ctx())

    assert log == ["early", "mid", "late"]
    assert [h.name for h in registry.hooks(HookPoint.PRE_TOOL_USE)] == ["early", "mid", "late"]


async def test_equal_priorities_keep_registration_order() -> None:
    log: list[str] = []
    registry = HookRegistry()
    for name in ("first", "second", "third"):
        registry.register(Step(name, log, priority=7))
    registry.register(Step("before_all", log, priority=6))

    await registry.run_pre_tool_use(pre_ctx())

    assert log == ["before_all", "first", "second", "third"]


async def test_a_hook_whose_should_trigger_is_false_is_skipped() -> None:
    log: list[str] = []
    blocker = Step("blocker", log, 1, result=HookResult(allow=False), trigger=False)
    registry = HookRegistry([blocker, Step("after", log, 2)])

    result = await registry.run_pre_tool_use(pre_ctx())

    assert result.allow
    assert log == ["after"]


# -- PreToolUse ---------------------------------------------------------------------------


async def test_each_pre_tool_use_hook_sees_the_arguments_rewritten_by_earlier_ones() -> None:
    seen: list[dict[str, Any]] = []

    class Rewrite(PreToolUseHook):
        def __init__(self, name: str, priority: int, change: dict[str, Any]) -> None:
            self.name, self.priority, self.change = name, priority, change

        async def execute(self, ctx: HookContext) -> HookResult:
            seen.append(dict(ctx.tool_args))
            return HookResult(modified_args={**ctx.tool_args, **self.change})

    registry = HookRegistry([
        Rewrite("cap", 1, {"amount": 100}),
        Rewrite("currency", 2, {"currency": "EUR"}),
        Rewrite("last", 3, {}),
    ])
    ctx = pre_ctx(amount=90_000, vendor="ACME")

    result = await registry.run_pre_tool_use(ctx)

    assert seen == [
        {"amount": 90_000, "vendor": "ACME"},
        {"amount": 100, "vendor": "ACME"},
        {"amount": 100, "vendor": "ACME", "currency": "EUR"},
    ]
    assert ctx.tool_args == result.modified_args == {
        "amount": 100, "vendor": "ACME", "currency": "EUR"}


async def test_first_block_stops_the_chain_and_the_tool_never_runs() -> None:
    log: list[str] = []
    runs: list[dict[str, Any]] = []
    pay = pay_tool(runs)
    registry = HookRegistry([
        Step("audit", log, 1),
        Step("deny", log, 2, result=HookResult(allow=False, error="payments are frozen")),
        Step("deny_again", log, 3, result=HookResult(allow=False, error="never seen")),
        Step("after", log, 4),
    ])

    outcome = await execute_tool_call(
        new_call(identity(), ToolCall("c1", pay.name, {"amount": 5, "vendor": "ACME"}),
                 {pay.name: pay}),
        registry=registry,
    )

    assert log == ["audit", "deny"]
    assert runs == []
    assert not outcome.allowed
    assert outcome.observation == "payments are frozen"
    assert outcome.blocked_by == "deny"


@pytest.mark.parametrize(("error", "observation"), [
    ("Blocked: the org is read-only until Monday.", "Blocked: the org is read-only until Monday."),
    (None, "Blocked by hook 'block_tool'."),
])
async def test_the_blocking_hooks_error_or_a_message_naming_it_reaches_the_model(
    error: str | None, observation: str
) -> None:
    shown: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        shown.append(messages)
        return {"answer": "ok"} if len(shown) > 1 else {"tool_calls": [PAY]}

    runs: list[dict[str, Any]] = []
    agent = agent_with([pay_tool(runs)], {"name": "tests.hookfixtures:BlockTool",
                                          "params": {"tool": "oa__purchase_pay", "error": error}})

    result = await ReActEngine(ScriptedLLM(model)).run(agent, "pay ACME", user_id="alice")

    assert result.status == "completed"
    assert runs == []
    tool_messages = [m for m in shown[1] if m["role"] == "tool"]
    assert tool_messages == [{"role": "tool", "tool_call_id": "c1", "content": observation}]


async def test_a_rewrite_that_is_not_a_dict_fails_closed() -> None:
    log: list[str] = []
    bad = Step("bad", log, 1, result=HookResult(modified_args=["amount", 1]))  # type: ignore[arg-type]
    registry = HookRegistry([bad, Step("after", log, 2)])

    result = await registry.run_pre_tool_use(pre_ctx(amount=1))

    assert not result.allow
    assert result.blocked_by == "bad"
    assert "modified_args must be a dict" in (result.error or "")
    assert log == ["bad"]


# -- PostToolUse and side effects ---------------------------------------------------------


async def test_post_tool_use_results_chain_and_the_last_rewrite_is_what_the_model_sees() -> None:
    seen: list[Any] = []

    class Rewrite(PostToolUseHook):
        def __init__(self, name: str, priority: int, suffix: str) -> None:
            self.name, self.priority, self.suffix = name, priority, suffix

        async def execute(self, ctx: HookContext) -> HookResult:
            seen.append(ctx.tool_result)
            return HookResult(modified_result=f"{ctx.tool_result}{self.suffix}")

    registry = HookRegistry([Rewrite("b", 2, "+b"), Rewrite("a", 1, "+a")])
    ctx = HookContext(HookPoint.POST_TOOL_USE, tool_name="t", tool_result="raw")

    result = await registry.run_post_tool_use(ctx)

    assert seen == ["raw", "raw+a"]
    assert ctx.tool_result == result.modified_result == "raw+a+b"


async def test_side_effects_are_attributed_to_their_hook_in_order() -> None:
    log: list[str] = []
    runs: list[dict[str, Any]] = []
    pay = pay_tool(runs)
    registry = HookRegistry([
        Step("audit", log, 1, result=HookResult(side_effects=["logged call c1"])),
        Step("limits", log, 2, result=HookResult(side_effects=["counted 1/10", "warned ops"])),
        PostStep("redact", log, HookResult(side_effects=["masked 2 fields"])),
    ])

    outcome = await execute_tool_call(
        new_call(identity(), ToolCall("c1", pay.name, {"amount": 5, "vendor": "ACME"}),
                 {pay.name: pay}),
        registry=registry,
    )

    assert outcome.side_effects == [
        "audit: logged call c1",
        "limits: counted 1/10",
        "limits: warned ops",
        "redact: masked 2 fields",
    ]
    effects = [(h["hook"], h["detail"]) for h in outcome.hooks if h["kind"] == "side_effect"]
    assert effects == [("audit", "logged call c1"), ("limits", "counted 1/10"),
                       ("limits", "warned ops"), ("redact", "masked 2 fields")]


# -- failure is closed by default ---------------------------------------------------------


@pytest.mark.parametrize("how", FAILURES)
async def test_a_failing_pre_tool_use_hook_blocks_the_call(how: str) -> None:
    runs: list[dict[str, Any]] = []
    pay = pay_tool(runs)
    registry = HookRegistry([MisbehavingPre(how)])

    outcome = await execute_tool_call(
        new_call(identity(), ToolCall("c1", pay.name, {"amount": 5, "vendor": "ACME"}),
                 {pay.name: pay}),
        registry=registry,
    )

    assert runs == []
    assert not outcome.allowed
    assert outcome.blocked_by == "misbehaving_pre"
    assert "hook 'misbehaving_pre'" in outcome.observation
    failure = next(h for h in outcome.hooks if h["kind"] == "failed")
    assert failure["hook"] == "misbehaving_pre"
    assert failure["fail_mode"] == "closed"


@pytest.mark.parametrize("how", FAILURES)
async def test_a_failing_post_tool_use_hook_withholds_the_raw_output(how: str) -> None:
    secret = "IBAN DE89 3704 0044 0532 0130 00"
    shown: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        shown.append(messages)
        return {"answer": "done"} if len(shown) > 1 else {
            "tool_calls": [{"name": "bank__lookup", "args": {}, "id": "c1"}]}

    from hookgate import tool

    @tool(name="bank__lookup")
    async def lookup() -> str:
        return secret

    agent = agent_with([lookup], {"name": "tests.hookfixtures:MisbehavingPost",
                                  "params": {"how": how}})

    result = await ReActEngine(ScriptedLLM(model)).run(agent, "look it up", user_id="alice")

    observation = next(m["content"] for m in shown[1] if m["role"] == "tool")
    assert secret not in observation
    assert "misbehaving_post" in observation
    assert secret not in json.dumps(shown[1])
    event = result.tool_events()[0]
    assert event["status"] == "withheld"
    assert event["error"] and secret not in event["observation"]
    assert secret not in json.dumps(result.trace)


@pytest.mark.parametrize("how", FAILURES)
async def test_a_failing_session_start_hook_stops_the_session_before_any_model_call(
    how: str,
) -> None:
    model_calls: list[Any] = []

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        model_calls.append(messages)
        return {"answer": "should never be asked"}

    agent = agent_with([], {"name": "tests.hookfixtures:MisbehavingSessionStart",
                            "params": {"how": how}})

    result = await ReActEngine(ScriptedLLM(model)).run(agent, "hi", user_id="alice")

    assert model_calls == []
    assert result.status == "session_blocked"
    assert "misbehaving_session_start" in (result.error or "")


@pytest.mark.parametrize("how", FAILURES)
@pytest.mark.parametrize("point", list(HookPoint))
async def test_fail_open_records_the_failure_and_the_chain_goes_on(
    point: HookPoint, how: str
) -> None:
    log: list[str] = []
    if point is HookPoint.PRE_TOOL_USE:
        chain: list[Any] = [MisbehavingPre(how, "open"), Step("after", log, 500)]
        result = await HookRegistry(chain).run_pre_tool_use(pre_ctx())
    elif point is HookPoint.POST_TOOL_USE:
        chain = [MisbehavingPost(how, "open"), PostStep("after", log, priority=500)]
        ctx = HookContext(HookPoint.POST_TOOL_USE, tool_name="t", tool_result="raw")
        result = await HookRegistry(chain).run_post_tool_use(ctx)
        assert ctx.tool_result == "raw"
        assert not result.withheld
    else:
        chain = [MisbehavingSessionStart(how, "open"), SessionStep("after", log)]
        result = await HookRegistry(chain).run_session_start(
            HookContext(HookPoint.SESSION_START))

    failing = chain[0].name
    assert result.allow
    assert log == ["after"]
    expected = {"hook": failing, "point": point.value, "kind": "failed",
                "detail": result.trace[0]["detail"], "fail_mode": "open"}
    if point is HookPoint.POST_TOOL_USE:
        # What a PostToolUse hook raised may quote the tool's output: admins only.
        expected["admin_output"] = result.trace[0]["admin_output"]
    assert result.trace == [expected]
    assert f"hook '{failing}'" in result.trace[0]["detail"]


async def test_fail_open_at_session_start_lets_the_model_run() -> None:
    model_calls: list[Any] = []

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        model_calls.append(messages)
        return {"answer": "hello"}

    agent = agent_with([], {"name": "tests.hookfixtures:MisbehavingSessionStart",
                            "params": {"how": "raise", "fail_mode": "open"}})

    result = await ReActEngine(ScriptedLLM(model)).run(agent, "hi", user_id="alice")

    assert result.status == "completed"
    assert len(model_calls) == 1
    session = next(e for e in result.trace if e["type"] == "session_start")
    assert session["hooks"][0]["kind"] == "failed"
    assert session["hooks"][0]["fail_mode"] == "open"


async def test_a_hook_with_a_timeout_is_cut_off_at_its_timeout() -> None:
    cancelled = asyncio.Event()

    class Slow(PreToolUseHook):
        name = "slow"
        timeout = 0.1

        async def execute(self, ctx: HookContext) -> HookResult:
            try:
                await asyncio.sleep(3600)
            finally:
                cancelled.set()
            return HookResult()

    started = time.monotonic()
    # The hook would sleep an hour: returning within a minute means it was cut off.
    async with asyncio.timeout(60):
        result = await HookRegistry([Slow()]).run_pre_tool_use(pre_ctx())
    assert time.monotonic() - started >= 0.1  # not before its timeout
    assert cancelled.is_set()
    assert not result.allow
    assert result.error == "Blocked: hook 'slow' timed out after 0.1s"


async def test_a_should_trigger_that_raises_is_a_hook_failure() -> None:
    log: list[str] = []

    class Picky(PreToolUseHook):
        def __init__(self, name: str, fail_mode: str) -> None:
            self.name, self.fail_mode = name, fail_mode  # type: ignore[assignment]

        def should_trigger(self, ctx: HookContext) -> bool:
            raise KeyError("vendor")

        async def execute(self, ctx: HookContext) -> HookResult:
            log.append(self.name)
            return HookResult()

    closed = await HookRegistry([Picky("closed", "closed"), Step("after", log, 500)]
                                ).run_pre_tool_use(pre_ctx())
    opened = await HookRegistry([Picky("open", "open"), Step("after", log, 500)]
                                ).run_pre_tool_use(pre_ctx())

    assert not closed.allow
    assert closed.blocked_by == "closed"
    assert opened.allow
    assert log == ["after"]


async def test_a_hook_that_raises_its_own_timeout_error_is_a_failure_not_a_crash() -> None:
    class Upstream(PreToolUseHook):
        name = "upstream"

        async def execute(self, ctx: HookContext) -> HookResult:
            raise TimeoutError("the rules server did not answer")

    result = await HookRegistry([Upstream()]).run_pre_tool_use(pre_ctx())

    assert not result.allow
    assert result.error == (
        "Blocked: hook 'upstream' failed: TimeoutError: the rules server did not answer")


async def test_a_resumed_chain_starts_at_the_named_hook() -> None:
    log: list[str] = []
    registry = HookRegistry([Step("a", log, 1), Step("b", log, 2), Step("c", log, 3)])

    await registry.run_pre_tool_use(pre_ctx(), start_at="b")

    assert log == ["b", "c"]
    with pytest.raises(KeyError, match="'gone'"):
        await registry.run_pre_tool_use(pre_ctx(), start_at="gone")


# -- membership ---------------------------------------------------------------------------


async def test_register_unregister_and_hooks_by_point() -> None:
    log: list[str] = []
    registry = HookRegistry()
    pre_a, pre_b = Step("pre_a", log, 2), Step("pre_b", log, 1)
    post, session = PostStep("post", log), SessionStep("session", log)
    for hook in (pre_a, post, pre_b, session):
        registry.register(hook)

    assert registry.hooks(HookPoint.PRE_TOOL_USE) == [pre_b, pre_a]
    assert registry.hooks(HookPoint.POST_TOOL_USE) == [post]
    assert registry.hooks(HookPoint.SESSION_START) == [session]
    assert set(map(id, registry.hooks())) == set(map(id, [pre_a, pre_b, post, session]))

    registry.unregister("pre_b")
    await registry.run_pre_tool_use(pre_ctx())

    assert registry.hooks(HookPoint.PRE_TOOL_USE) == [pre_a]
    assert log == ["pre_a"]
    with pytest.raises(KeyError, match="pre_b"):
        registry.unregister("pre_b")
    with pytest.raises(TypeError, match="not a hook"):
        registry.register(object())  # type: ignore[arg-type]


async def test_hooks_registered_in_a_batch_run_as_registered_one_by_one() -> None:
    # A batch precomputes each point's chain once, when it ends (also when it raises);
    # an option assigned inside it counts, and a nested batch changes nothing.
    log: list[str] = []
    registry = HookRegistry()
    late = Step("late", log, 5)
    with registry.batch():
        registry.register(late)
        with registry.batch():
            registry.register(Step("early", log, 1))
        registry.register(PostStep("post", log))
        late.priority = 0
        assert await registry.run_pre_tool_use(pre_ctx()) is not None
        assert log == []  # nothing registered runs before the batch ends
    await registry.run_pre_tool_use(pre_ctx())
    assert log == ["late", "early"]

    with pytest.raises(DuplicateHookError), registry.batch():
        registry.register(Step("first", log, 2))
        registry.register(Step("first", log, 3))
    log.clear()
    await registry.run_pre_tool_use(pre_ctx())
    assert log == ["late", "early", "first"]


async def test_two_hooks_with_one_name_are_rejected() -> None:
    log: list[str] = []
    first = Step("audit", log, 1)
    registry = HookRegistry([first])

    with pytest.raises(DuplicateHookError, match="'audit'") as raised:
        registry.register(PostStep("audit", log))

    assert isinstance(raised.value, HookError)
    assert registry.hooks() == [first]
    assert registry.hooks(HookPoint.POST_TOOL_USE) == []


async def test_a_hook_without_a_name_is_registered_under_its_class_name() -> None:
    class Anonymous(PreToolUseHook):
        async def execute(self, ctx: HookContext) -> HookResult:
            return HookResult(allow=False)

    registry = HookRegistry([Anonymous()])
    result = await registry.run_pre_tool_use(pre_ctx())

    assert result.blocked_by == "Anonymous"
    assert result.error == "Blocked by hook 'Anonymous'."



async def test_a_chain_where_nothing_happened_answers_with_a_shared_read_only_result() -> None:
    import dataclasses

    from hookgate.hooks.trace import UNCHANGED

    registry = HookRegistry()
    ctx = HookContext(hook_point=HookPoint.PRE_TOOL_USE, tool_name="t", tool_args={"a": 1})
    first = await registry.run_pre_tool_use(ctx)
    second = await registry.run_pre_tool_use(ctx)
    assert first is second is UNCHANGED
    assert first.allow is True and first.modified_args is None and not first.side_effects
    with pytest.raises(AttributeError, match="read-only"):
        first.allow = False
    copy = dataclasses.replace(first, allow=False)
    copy.error = "editable"
    assert copy.error == "editable" and UNCHANGED.allow is True


async def test_plain_hooks_hand_over_mid_chain_without_running_anything_twice() -> None:
    """A chain of plain hooks runs on the fast loop until one does something; from there the
    full loop continues with that hook's answer, and no hook runs twice."""
    ran: list[str] = []

    def plain(name: str, answer: Any) -> PreToolUseHook:
        class Plain(PreToolUseHook):
            async def execute(self, ctx: HookContext) -> HookResult:
                ran.append(name)
                if isinstance(answer, Exception):
                    raise answer
                return answer(ctx) if callable(answer) else answer

        hook = Plain()
        hook.name = name
        return hook

    registry = HookRegistry([
        plain("quiet", HookResult()),
        plain("rewriter", lambda ctx: HookResult(modified_args={**ctx.tool_args, "n": 2})),
        plain("reader", lambda ctx: HookResult(side_effects=[f"saw n={ctx.tool_args['n']}"])),
        plain("breaks", RuntimeError("boom")),
        plain("never", HookResult()),
    ])
    ctx = HookContext(hook_point=HookPoint.PRE_TOOL_USE, tool_name="t", tool_args={"n": 1})
    result = await registry.run_pre_tool_use(ctx)
    assert ran == ["quiet", "rewriter", "reader", "breaks"]
    assert result.allow is False and result.blocked_by == "breaks"
    assert "RuntimeError: boom" in (result.error or "")
    assert result.side_effects == ["reader: saw n=2"]
    assert ctx.tool_args == {"n": 2}


# -- a registry extended per call (decision record 0034) ----------------------------------


async def test_an_extended_registry_runs_its_hooks_and_its_own_in_order_and_leaves_the_base_alone(
        ) -> None:
    log: list[str] = []
    base = HookRegistry([Step("early", log, priority=1), PostStep("after", log)])

    one = base.extended()
    one.register(Step("late", log, priority=500))
    two = base.extended()

    await one.run_pre_tool_use(pre_ctx(amount=1))
    await two.run_pre_tool_use(pre_ctx(amount=1))
    await one.run_post_tool_use(HookContext(HookPoint.POST_TOOL_USE, tool_name="t"))
    assert log == ["early", "late", "early", "after"]
    assert [h.name for h in base.hooks()] == [h.name for h in two.hooks()] == ["early", "after"]
    with pytest.raises(DuplicateHookError):
        base.extended().register(Step("early", log))


async def test_an_extended_registry_takes_telemetry_as_it_is_when_it_is_extended(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from hookgate.hooks import registry as hook_registry

    log: list[str] = []
    base = HookRegistry([Step("step", log), PostStep("after", log)])

    def timed(hook: Any) -> Any:
        async def run(ctx: HookContext) -> HookResult:
            log.append(f"timed {hook.name}")
            return await hook.execute(ctx)
        return run

    monkeypatch.setattr(hook_registry, "instrument", timed)  # telemetry switched on
    extended = base.extended()
    await extended.run_pre_tool_use(pre_ctx(amount=1))
    await extended.run_post_tool_use(HookContext(HookPoint.POST_TOOL_USE, tool_name="t"))
    await base.run_pre_tool_use(pre_ctx(amount=1))  # built before: as it was built

    assert log == ["timed step", "step", "timed after", "after", "step"]
