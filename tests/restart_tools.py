"""Tools for the restart tests: the payment's side effect is a line in a file, so it can be
counted across server processes."""

from __future__ import annotations

import asyncio
import os

from hookgate import tool


@tool(requires_confirmation=lambda a: a["amount"] > 50_000, writes=True)
async def oa__purchase_pay(amount: float, vendor: str) -> str:
    """Pay a vendor (appends a line to $HOOKGATE_TEST_LEDGER)."""
    def append() -> None:
        with open(os.environ["HOOKGATE_TEST_LEDGER"], "a", encoding="utf-8") as f:
            f.write(f"{amount:.0f} {vendor}\n")

    await asyncio.to_thread(append)
    return f"paid {amount:.0f} to {vendor}"
