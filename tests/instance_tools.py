"""Tools for the several-instances tests: each side effect is a line in $HOOKGATE_TEST_LEDGER
naming the run's reference and the process, so executions can be counted across processes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

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
    """A side effect that takes $HOOKGATE_TEST_SLOW_S seconds, or until the test releases
    it (a file named ``ref`` in $HOOKGATE_TEST_RELEASE_DIR), whichever comes first."""
    await asyncio.to_thread(_record, f"start {ref}")
    # Released by a file another process (the test) writes: polled, 20 times a second.
    released = Path(os.environ.get("HOOKGATE_TEST_RELEASE_DIR", "/nonexistent")) / ref
    for _ in range(round(float(os.environ.get("HOOKGATE_TEST_SLOW_S", "3")) * 20)):
        if released.exists():
            break
        await asyncio.sleep(0.05)
    await asyncio.to_thread(_record, f"end {ref}")
    return f"stepped {ref}"


@tool(writes=True)
async def note(ref: str) -> str:
    """A quick side effect."""
    await asyncio.to_thread(_record, f"note {ref}")
    return f"noted {ref}"
