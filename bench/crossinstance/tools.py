"""The benchmark's tool: it needs approval, and its first line appends the wall-clock time
to $HOOKGATE_BENCH_STAMPS (the instances and the benchmark share one machine clock)."""

from __future__ import annotations

import os
import time

from hookgate import tool


@tool(requires_confirmation=True, writes=True)
async def stamp(ref: str) -> str:
    """Record when the tool started."""
    started = time.time()
    with open(os.environ["HOOKGATE_BENCH_STAMPS"], "a", encoding="utf-8") as f:
        f.write(f"{started:.6f}\n")
    return f"stamped {ref}"
