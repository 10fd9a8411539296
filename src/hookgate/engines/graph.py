"""Dependency graphs shared by the DAG engine and workflows: check one, then run it.

A node starts as soon as everything it depends on has settled; nodes that do not wait on
each other run concurrently. Whether a node runs or is skipped is the caller's rule.
"""

from __future__ import annotations

import asyncio
import graphlib
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, Literal

from hookgate.engines.interrupts import RunParked, RunStopped
from hookgate.tools.calls import ToolOutcome

Readiness = tuple[Literal["run", "wait", "skip"], str]

#: How a guarded call settles the node that made it: only "ok" lets its dependents run.
_SETTLED_AS = {"ok": "ok", "error": "failed", "withheld": "failed"}


class GraphError(ValueError):
    """The graph's shape is wrong: a repeated id, an unknown dependency, or a cycle."""


def check_graph(order: Sequence[str], deps: Mapping[str, Sequence[str]], what: str) -> None:
    """Raise GraphError naming the problem; ``what`` is the word for a node ("step", "node")."""
    seen: set[str] = set()
    for node in order:
        if node in seen:
            raise GraphError(f"{what} id '{node}' is used twice")
        seen.add(node)
    for node in order:
        for dep in deps.get(node, ()):
            if dep == node:
                raise GraphError(f"{what} '{node}' depends on itself")
            if dep not in seen:
                raise GraphError(f"{what} '{node}' depends on unknown {what} '{dep}' "
                                 f"(known: {', '.join(order)})")
    cycle = _find_cycle(order, deps)
    if cycle:
        raise GraphError(f"the {what}s form a cycle: {' → '.join(cycle)}")


def _find_cycle(order: Sequence[str], deps: Mapping[str, Sequence[str]]) -> list[str]:
    """A cycle as a path along "depends on" (first and last the same), or []."""
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter(
        {node: deps.get(node, ()) for node in order})
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        # graphlib lists each node before the one depending on it: read it backwards,
        # from the node the plan lists first.
        ring = list(reversed(exc.args[1]))[:-1]
        position = {node: i for i, node in enumerate(order)}
        start = min(range(len(ring)), key=lambda i: position.get(ring[i], len(order)))
        ring = ring[start:] + ring[:start]
        return [*ring, ring[0]]
    return []


async def run_graph(
    order: Sequence[str],
    settled: Callable[[str], bool],
    readiness: Callable[[str], Readiness],
    run: Callable[[str], Coroutine[Any, Any, None]],
    skip: Callable[[str, str], Awaitable[None]],
) -> None:
    """Run every unsettled node once it is ready, concurrently where the graph allows.

    ``readiness(node)`` says "run", "wait" (something it depends on has not settled) or
    "skip" with the reason; ``run`` and ``skip`` must leave the node settled. An error in a
    node cancels the others and propagates. A node whose hook stopped the run (RunStopped)
    starts nothing more: the nodes already running finish, then the stop propagates.
    """
    running: dict[asyncio.Task[None], str] = {}
    # A node that parked (waits for a person) is not run again in this advance; the others
    # go on, and the run parks once nothing else can run.
    parked: dict[str, BaseException] = {}
    stopped: RunStopped | None = None
    try:
        while True:
            changed = stopped is None
            while changed:
                changed = False
                active = set(running.values()) | set(parked)
                for node in order:
                    if node in active or settled(node):
                        continue
                    decision, reason = readiness(node)
                    if decision == "skip":
                        await skip(node, reason)
                        changed = True
                    elif decision == "run":
                        running[asyncio.create_task(run(node))] = node
                        active.add(node)
            if not running:
                if stopped is not None:
                    raise stopped
                if parked:
                    raise next(iter(parked.values()))
                return
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                node = running.pop(task)
                exc = None if task.cancelled() else task.exception()
                if isinstance(exc, RunParked):
                    parked[node] = exc
                    continue
                if isinstance(exc, RunStopped):
                    stopped = stopped or exc
                    continue
                task.result()
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)


def settle(outcome: ToolOutcome) -> dict[str, Any]:
    """A node's record after its tool call: status (ok, blocked, failed), result, reason."""
    status = _SETTLED_AS.get(outcome.status, "blocked")
    return {"status": status, "result": outcome.observation,
            "reason": None if status == "ok" else str(outcome.error or outcome.observation)}
