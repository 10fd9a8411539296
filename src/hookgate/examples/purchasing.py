"""The purchasing example's tools: an OA payment that needs approval above 50,000, and a
read-only vendor list. ``purchasing.yaml`` imports them.
"""

from __future__ import annotations

from hookgate.tools.tool import tool

APPROVAL_THRESHOLD = 50_000

VENDORS: tuple[str, ...] = ("ACME", "Globex", "Initech")


@tool(requires_confirmation=lambda a: a["amount"] > APPROVAL_THRESHOLD, writes=True,
      confirmation_reason=f"payments above {APPROVAL_THRESHOLD:,} need a person's approval")
async def oa__purchase_pay(amount: float, vendor: str) -> str:
    """Pay a vendor through the OA system. Amounts above 50,000 need a person's approval."""
    return f"Paid {amount:,.2f} to {vendor}; OA payment confirmed."


@tool
async def oa__list_vendors() -> list[str]:
    """List the approved vendors."""
    return list(VENDORS)
