"""What the hook chains cost per tool call, against a bare loop over the same hooks.

For N in (0, 1, 5, 20) the registry holds N no-op PreToolUse hooks and N no-op PostToolUse
hooks (N of each). One "call" is `run_pre_tool_use` + `run_post_tool_use`; the bare loop
awaits the same 2N hooks' `execute()` with none of the registry's logic. The whole guarded
path (`execute_tool_call`, trivial async tool body) is timed too, with nothing subtracted.
Each figure is the median of several rounds' medians, in microseconds. Prints JSON.

``otel`` (when the OpenTelemetry SDK is installed, ``pip install 'hookgate[otel]'``): the
guarded path with 5 hooks per point with telemetry off and on, in alternating rounds. "On"
is the SDK recording every span (1 execute_tool + 10 hook spans per call) and aggregating
the metrics in memory, with nothing exported; the main figures above are all "off".

    python bench/dispatch.py [--iterations 20000] [--rounds 5] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import statistics
import time
from collections.abc import Awaitable, Callable

from hookgate import HookContext, HookPoint, HookRegistry, HookResult, tool
from hookgate.hooks import PostToolUseHook, PreToolUseHook
from hookgate.tools import CallIdentity, ToolCall, execute_tool_call
from hookgate.tools.guarded_call import new_call

SIZES = (0, 1, 5, 20)
TARGET_RATIO_AT_5 = 1.5
_ALLOW = HookResult()


class _NoOpPre(PreToolUseHook):
    async def execute(self, ctx: HookContext) -> HookResult:
        return _ALLOW


class _NoOpPost(PostToolUseHook):
    async def execute(self, ctx: HookContext) -> HookResult:
        return _ALLOW


@tool
async def echo(text: str) -> str:
    """Return the text (the trivial tool body of the guarded-path figure)."""
    return text


def _registry(n: int) -> HookRegistry:
    registry = HookRegistry()
    for i in range(n):
        pre, post = _NoOpPre(), _NoOpPost()
        pre.name, post.name = f"pre_{i}", f"post_{i}"
        registry.register(pre)
        registry.register(post)
    return registry


def _context() -> HookContext:
    return HookContext(
        hook_point=HookPoint.PRE_TOOL_USE,
        tool_name="echo",
        tool_args={"text": "hi"},
        agent_id="bench",
        metadata={"run_id": "run_bench", "tool_call_id": "call_0"},
    )


async def _round_median_us(step: Callable[[], Awaitable[object]], iterations: int) -> float:
    """One round: the median per-call time over batches of 100 calls, in microseconds."""
    batch = 100
    samples = []
    for _ in range(max(1, iterations // batch)):
        t0 = time.perf_counter_ns()
        for _ in range(batch):
            await step()
        samples.append((time.perf_counter_ns() - t0) / batch / 1000)
    return statistics.median(samples)


async def _measure(n: int, iterations: int, rounds: int) -> dict[str, object]:
    registry = _registry(n)
    pre_hooks = registry.hooks(HookPoint.PRE_TOOL_USE)
    post_hooks = registry.hooks(HookPoint.POST_TOOL_USE)
    ctx = _context()

    async def through_registry() -> None:
        ctx.hook_point = HookPoint.PRE_TOOL_USE
        await registry.run_pre_tool_use(ctx)
        ctx.hook_point = HookPoint.POST_TOOL_USE
        ctx.tool_result = "hi"
        await registry.run_post_tool_use(ctx)

    async def bare_loop() -> None:
        ctx.hook_point = HookPoint.PRE_TOOL_USE
        for h in pre_hooks:
            await h.execute(ctx)
        ctx.hook_point = HookPoint.POST_TOOL_USE
        ctx.tool_result = "hi"
        for h in post_hooks:
            await h.execute(ctx)

    tools = {echo.name: echo}
    identity = CallIdentity(agent_id="bench", user_id="u", org_id="o", run_id="run_bench")
    call = ToolCall("call_0", "echo", {"text": "hi"})

    async def guarded_path() -> None:
        await execute_tool_call(new_call(identity, call, tools), registry=registry)

    # Rounds alternate between the three, so drift in machine load hits them alike; each
    # figure is the median of its round medians.
    for step in (through_registry, bare_loop, guarded_path):  # warm up (specialisation)
        await _round_median_us(step, 2_000)
    rounds_us: dict[str, list[float]] = {"registry": [], "bare": [], "guarded": []}
    for _ in range(rounds):
        rounds_us["registry"].append(await _round_median_us(through_registry, iterations))
        rounds_us["bare"].append(await _round_median_us(bare_loop, iterations))
        rounds_us["guarded"].append(await _round_median_us(guarded_path, iterations // 4))
    registry_us, bare_us, guarded_us = (
        statistics.median(rounds_us[k]) for k in ("registry", "bare", "guarded"))
    return {
        "hooks_per_point": n,
        "pre_hooks": n,
        "post_hooks": n,
        "registry_us": round(registry_us, 3),
        "bare_loop_us": round(bare_us, 3),
        "ratio": round(registry_us / bare_us, 3) if n else None,
        "guarded_path_us": round(guarded_us, 3),
    }


async def _otel(iterations: int, rounds: int, n: int = 5) -> dict[str, object] | None:
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        return None
    from hookgate.hooks import registry as registry_module
    from hookgate.telemetry.switch import SWITCH, refresh

    plain = _registry(n)  # registered with telemetry off: the hooks are not wrapped
    trace.set_tracer_provider(TracerProvider())
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    assert refresh() and registry_module.instrument is not None
    traced = _registry(n)
    tools = {echo.name: echo}
    identity = CallIdentity(agent_id="bench", user_id="u", org_id="o", run_id="run_bench")
    call = ToolCall("call_0", "echo", {"text": "hi"})

    async def off() -> None:
        await execute_tool_call(new_call(identity, call, tools), registry=plain)

    async def on() -> None:
        await execute_tool_call(new_call(identity, call, tools), registry=traced)

    # The switch is what a process without a provider has: flip it per round, so the two
    # figures alternate like the ones above.
    samples: dict[str, list[float]] = {"off": [], "on": []}
    for state, step in ((False, off), (True, on)):
        SWITCH.on = state
        await _round_median_us(step, 1_000)
    for _ in range(rounds):
        for state, key, step in ((False, "off", off), (True, "on", on)):
            SWITCH.on = state
            samples[key].append(await _round_median_us(step, iterations // 4))
    off_us, on_us = (statistics.median(samples[k]) for k in ("off", "on"))
    return {"hooks_per_point": n, "guarded_path_us_off": round(off_us, 3),
            "guarded_path_us_on": round(on_us, 3), "spans_per_call": 1 + 2 * n}


async def main(iterations: int, rounds: int) -> dict[str, object]:
    gc.disable()  # as timeit does: a collection landing in one sample is noise, not cost
    try:
        results = [await _measure(n, iterations, rounds) for n in SIZES]
        otel = await _otel(iterations, rounds)
    finally:
        gc.enable()
    at_5 = next(r for r in results if r["hooks_per_point"] == 5)
    first, last = results[0], results[-1]
    hooks_added = 2 * (SIZES[-1] - SIZES[0])

    def per_hook(key: str) -> float:
        return round((float(last[key]) - float(first[key])) / hooks_added, 4)  # type: ignore[arg-type]

    return {
        "benchmark": "hook dispatch",
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "what": "per tool call: run_pre_tool_use + run_post_tool_use with N no-op PreToolUse "
                "and N no-op PostToolUse hooks, vs a bare loop awaiting the same hooks' "
                "execute(); guarded_path_us is the whole execute_tool_call",
        "iterations": iterations,
        "rounds": rounds,
        "results": results,
        "marginal_us_per_hook": {"registry": per_hook("registry_us"),
                                 "bare_loop": per_hook("bare_loop_us")},
        "fixed_us_per_call_without_hooks": {"registry": first["registry_us"],
                                            "bare_loop": first["bare_loop_us"]},
        "target_ratio_at_5": TARGET_RATIO_AT_5,
        "ratio_at_5": at_5["ratio"],
        "otel": otel,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a few iterations (checks the "
                        "bench works)")
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.rounds = 400, 2
    print(json.dumps(asyncio.run(main(args.iterations, args.rounds)), indent=2))
