"""The demo's scripted model: it pays what the user's message asks (vendor and amounts read
from it) and its answer says what happened, read from the observations: a payment that ran
is reported paid, one a person rejected (or that expired) is reported not paid, and why."""

from __future__ import annotations

import json
import re
from typing import Any

from hookgate.examples.purchasing import VENDORS
from hookgate.llm.base import Message
from hookgate.llm.scripted import Turn

PAY = "oa__purchase_pay"
LIST = "oa__list_vendors"
#: Amounts in the message: "60000", "60,000", "12,000.50" (not the 3 of "Q3").
_AMOUNT = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w,])")
#: The purchasing tool's own words when a payment went through.
_PAID_MARK = "OA payment confirmed"
_PAID = re.compile(r"Paid ([\d,]+(?:\.\d+)?) to ")
#: The gate's note when an approver changed the arguments before approving.
_EDITED_BY = re.compile(r"Note: (\S+) changed the arguments before approving")


def demo_turn(messages: list[Message]) -> Turn:
    """The next turn: list the vendors, pay each amount, then answer from the results."""
    request = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"),
                   "")
    vendor = next((v for v in VENDORS if re.search(rf"\b{re.escape(v)}\b", request, re.I)),
                  None)
    amounts = [float(a.replace(",", "")) for a in _AMOUNT.findall(request)]
    amounts = [a for a in amounts if a > 0]
    done = sum(1 for m in messages if m.get("role") == "assistant")
    if vendor is None or not amounts:
        return {"answer": (f"I pay approved vendors ({', '.join(VENDORS)}). Tell me which "
                           "vendor and how much, e.g. \"Pay ACME 60,000\".")}
    if done == 0:
        return {"tool_calls": [{"name": LIST, "args": {}}]}
    if done <= len(amounts):
        amount = amounts[done - 1]
        return {"tool_calls": [{"name": PAY, "args": {"amount": amount, "vendor": vendor}}]}
    return {"answer": _report(messages, vendor)}


def _report(messages: list[Message], vendor: str) -> str:
    """One sentence per payment, from what the tool (or the gate) answered."""
    results = {str(m.get("tool_call_id")): str(m.get("content") or "")
               for m in messages if m.get("role") == "tool"}
    lines = []
    for call in _calls(messages):
        if call.get("name") != PAY:
            continue
        amount = _amount(call.get("args"))
        observation = results.get(str(call.get("id")), "")
        paid = _PAID.search(observation)
        if _PAID_MARK in observation and paid:
            # The approver may have changed the amount: report what the tool paid.
            actual = _amount({"amount": float(paid.group(1).replace(",", ""))})
            editor = _EDITED_BY.search(observation)
            if actual != amount and editor:
                lines.append(f"Paid {vendor} {actual} ({editor.group(1)} changed it from "
                             f"{amount}).")
            else:
                lines.append(f"Paid {vendor} {actual}.")
        else:
            lines.append(f"Did not pay {vendor} {amount}: {observation}")
    return " ".join(lines) or f"No payment to {vendor} was made."


def _calls(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") != "assistant":
            continue
        for call in m.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call.get("function"), dict) else None
            if fn is not None:  # OpenAI wire shape
                args = fn.get("arguments")
                out.append({"id": call.get("id"), "name": fn.get("name"),
                            "args": json.loads(args) if isinstance(args, str) else args})
            else:
                out.append(call)
    return out


def _amount(args: Any) -> str:
    value = args.get("amount") if isinstance(args, dict) else None
    if isinstance(value, int | float):
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
    return "the amount asked"
