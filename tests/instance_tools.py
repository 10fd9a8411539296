"""Tools for the several-instances tests: each side effect is a line in $HOOKGATE_TEST_LEDGER
naming the run's reference and the process, so executions can be counted across processes."""

from __future__ import annotations

import asyncio
import os

from hookgate import tool


def _record(line: str) -> None:
    with open(os.environ["HOOKGATE_TEST_LEDGER"], "a", encoding="utf-8") as f:
        f.write(f"{line} {os.getpid()}\n")


@tool(requires_confirmation=True, writes=True)
async def pay(ref: str) -> str:
    """Pay for ``ref`` (needs a person's approval)."""
    await asyncio.to_thread(_record, f"pay {ref}")
    return f"paid {ref}"


@tool(writes=True)
async def slow_step(ref: str) -> str:
    """A side effect that takes $HOOKGATE_TEST_SLOW_S seconds."""
    await asyncio.to_thread(_record, f"start {ref}")
    await asyncio.sleep(float(os.environ.get("HOOKGATE_TEST_SLOW_S", "3")))
    await asyncio.to_thread(_record, f"end {ref}")
    return f"stepped {ref}"


@tool(writes=True)
async def note(ref: str) -> str:
    """A quick side effect."""
    await asyncio.to_thread(_record, f"note {ref}")
    return f"noted {ref}"
