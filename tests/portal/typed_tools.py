"""A tool with arguments of every plain type (and a nested one) for the inbox's edit form,
served by a real `hookgate serve`: each transfer that runs is a JSON line in a file."""

from __future__ import annotations

import asyncio
import json
import os

from hookgate import tool


@tool(requires_confirmation=lambda a: a["amount"] > 1000, writes=True,
      confirmation_reason="transfers above 1,000 need a person's approval")
async def bank__transfer(amount: float, vendor: str, express: bool, batches: int,
                         tags: list[str]) -> str:
    """Transfer money to a supplier's account."""
    line = json.dumps({"amount": amount, "vendor": vendor, "express": express,
                       "batches": batches, "tags": tags}, sort_keys=True)

    def append() -> None:
        with open(os.environ["HOOKGATE_TEST_LEDGER"], "a", encoding="utf-8") as f:
            f.write(line + "\n")

    await asyncio.to_thread(append)
    return f"transferred {amount:.0f} to {vendor}"
