"""Hook classes that tests declare by ``tests.hookfixtures:Class`` in an agent's ``class_hooks``,
and the counted tool and agent they guard.

They are real hooks (nothing here stands in for hookgate code). What they see is written to
``services.extra["journal"]`` (a list the test passes in through HookServices), so each test
reads its own record and nothing leaks between tests.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from hookgate import (
    Agent,
    HookContext,
    HookResult,
    PostToolUseHook,
    PreToolUseHook,
    SessionStartHook,
    Tool,
    tool,
)
from hookgate.catalog import BuildEnv
from hookgate.engines.interrupts import RunParked
from hookgate.hooks import FailMode

#: How a misbehaving hook fails: it raises, it overruns its timeout, or it answers with
#: something that is not a HookResult.
FAILURES = ("raise", "timeout", "not_a_result")


async def misbehave(how: str) -> Any:
    if how == "raise":
        raise RuntimeError("the policy service is unreachable")
    if how == "timeout":
        await asyncio.sleep(30)
        return HookResult()
    if how == "not_a_result":
        return {"allow": True}
    raise ValueError(f"unknown failure {how!r}")


class _Journaled:
    """Builds from a declaration and keeps the journal list from the build's services."""

    journal: list[Any]

    @classmethod
    def from_declaration(cls, params: dict[str, Any], env: BuildEnv) -> Any:
        hook = cls(**params)
        hook.journal = env.services.extra.setdefault("journal", [])
        return hook


class RecordCall(_Journaled, PreToolUseHook):
    """Writes what it was shown: (hook name, tool name, arguments, metadata); reports
    ``side_effect`` when given one."""

    name = "record_call"
    priority = 10

    def __init__(self, name: str = "record_call", priority: int = 10,
                 side_effect: str | None = None) -> None:
        self.name = name
        self.priority = priority
        self.side_effect = side_effect

    async def execute(self, ctx: HookContext) -> HookResult:
        self.journal.append((self.name, ctx.tool_name, dict(ctx.tool_args), dict(ctx.metadata)))
        return HookResult(side_effects=[self.side_effect] if self.side_effect else [])


class BlockTool(PreToolUseHook):
    """Says no to one tool by name, with ``error`` (or none, to get the default message)."""

    name = "block_tool"
    priority = 20

    def __init__(self, tool: str, error: str | None = None) -> None:
        self.tool = tool
        self.error = error

    def should_trigger(self, ctx: HookContext) -> bool:
        return ctx.tool_name == self.tool

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(allow=False, error=self.error)


class SetArgs(PreToolUseHook):
    """Rewrites the arguments: every key in ``values`` is set to its value."""

    name = "set_args"
    priority = 30

    def __init__(self, values: dict[str, Any], priority: int = 30) -> None:
        self.values = values
        self.priority = priority

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(modified_args={**ctx.tool_args, **self.values})


class _Misbehaving:
    """Fails the way ``how`` says (one of FAILURES), within a 0.05 s timeout."""

    timeout: float | None = 0.05
    fail_mode: FailMode = "closed"

    def __init__(self, how: str, fail_mode: FailMode = "closed") -> None:
        self.how = how
        self.fail_mode = fail_mode

    async def execute(self, ctx: HookContext) -> HookResult:
        result: HookResult = await misbehave(self.how)
        return result


class MisbehavingPre(_Misbehaving, PreToolUseHook):
    name = "misbehaving_pre"


class MisbehavingPost(_Misbehaving, PostToolUseHook):
    name = "misbehaving_post"


class MisbehavingSessionStart(_Misbehaving, SessionStartHook):
    name = "misbehaving_session_start"


class AddContext(SessionStartHook):
    """Adds ``text`` to the initial prompt."""

    name = "add_context"

    def __init__(self, text: str) -> None:
        self.text = text

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(additional_context=self.text, side_effects=["context added"])


class SpendLimit(PreToolUseHook):
    """Blocks a call whose ``amount`` is above ``limit`` (needs its parameter)."""

    name = "spend_limit"
    priority = 50

    def __init__(self, limit: int) -> None:
        self.limit = limit

    async def execute(self, ctx: HookContext) -> HookResult:
        if ctx.tool_args.get("amount", 0) > self.limit:
            return HookResult(allow=False, error=f"amount above the limit of {self.limit}")
        return HookResult()


class VeryLate(PreToolUseHook):
    """A hook that asks to run after everything (a priority above the gate's)."""

    name = "very_late"
    priority = 10**12

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult()


class NotAHook:
    """A class with an ``execute`` but no hook base: it must not be accepted as a hook."""

    name = "not_a_hook"

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult()


def pay_tool(runs: list[dict[str, Any]], *, requires_confirmation: Any = False) -> Tool:
    """``oa__purchase_pay``: a real tool whose body appends the arguments it ran with to
    ``runs``, so a test can tell exactly how often (and with what) it ran."""

    @tool(name="oa__purchase_pay", writes=True, requires_confirmation=requires_confirmation)
    async def pay(amount: int, vendor: str) -> str:
        """Pay a vendor."""
        runs.append({"amount": amount, "vendor": vendor})
        return f"paid {amount} to {vendor}"

    return pay


def agent_with(tools: list[Tool], *class_hooks: Any, **fields: Any) -> Agent:
    """An agent named ``buyer`` with ``tools`` and these ``class_hooks`` entries."""
    return Agent(
        id="buyer",
        name="Purchasing agent",
        instructions="You buy what the user asks for.",
        tools=tools,
        model_config_json={"hooks": {"class_hooks": list(class_hooks)}},
        **fields,
    )


class Linger(PreToolUseHook):
    """Takes ``seconds`` before letting a call on: widens the moment between a call's arrival
    and its approval request, so two instances reliably take the same call at once."""

    name = "linger"
    priority = 5

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def execute(self, ctx: HookContext) -> HookResult:
        await asyncio.sleep(self.seconds)
        return HookResult()


class ParkOnce(PreToolUseHook):
    """Parks the run at ``tool``'s first call as the approval gate does on the run queue
    (announces a pending request, then raises RunParked); allows it afterwards."""

    name = "park_once"
    priority = 90
    parked: ClassVar[set[tuple[str, str]]] = set()

    def __init__(self, tool: str) -> None:
        self.tool = tool

    def should_trigger(self, ctx: HookContext) -> bool:
        return ctx.tool_name == self.tool

    async def execute(self, ctx: HookContext) -> HookResult:
        key = (str(ctx.metadata.get("run_id")), str(ctx.metadata.get("tool_call_id")))
        if key not in ParkOnce.parked:
            ParkOnce.parked.add(key)
            if ctx.emit is not None:
                ctx.emit("confirmation_pending", {"request_id": f"req_{key[1]}",
                                                  "tool_call_id": key[1]})
            raise RunParked(f"req_{key[1]}")
        return HookResult(allow=True)
