"""Attempts to get a payment past a Cedar policy that permits only payments up to 50,000
(default deny): numbers Cedar cannot hold exactly (NaN, 1e300, 2**70, a fifth decimal place
just above the limit, a Long past 64 bits), look-alike tool names, missing keys and values
of another type than the signature's. Through the real engine none is paid; put to the
policy set directly, none is allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hookgate.policies import CallFacts
from hookgate.policies.live import LivePolicySet
from hookgate.storage.database import Database
from tests.adversarial.conftest import Tally
from tests.policies.fixtures import pdb, policy_db_url
from tests.policies.world import PAID, TOOLS, agent, call, run, write_policies

__all__ = ["pdb", "policy_db_url"]

UP_TO_50K = """\
@id("small-payments")
permit(principal, action == Action::"oa__purchase_pay", resource)
when { context.args.amount.lessThanOrEqual(decimal("50000.0")) &&
       (if context.args has units then context.args.units <= 10 else true) };
"""

#: Arguments of a payment the policy must not let through (name → args).
THROUGH_THE_ENGINE: dict[str, dict[str, Any]] = {
    "NaN amount": {"amount": float("nan"), "vendor": "ACME"},
    "1e300 amount": {"amount": 1e300, "vendor": "ACME"},
    "-1e300 amount": {"amount": -1e300, "vendor": "ACME"},
    "2**70 amount": {"amount": 2**70, "vendor": "ACME"},
    "a fifth decimal place above the limit": {"amount": 50000.00001, "vendor": "ACME"},
    "units past 64 bits": {"amount": 10, "vendor": "ACME", "units": 2**64 + 1},
    "units past 64 bits, negative": {"amount": 10, "vendor": "ACME", "units": -(2**64)},
}

#: The same facts the hook would hand over, each one bent (name → tool name, args).
PUT_DIRECTLY: dict[str, tuple[str, dict[str, Any]]] = {
    "zero-width space in the tool name": ("oa__purchase_pay\u200b",
                                          {"amount": 10, "vendor": "ACME"}),
    "Cyrillic o in the tool name": ("\u043ea__purchase_pay", {"amount": 10, "vendor": "ACME"}),
    "upper-case tool name": ("OA__purchase_pay", {"amount": 10, "vendor": "ACME"}),
    "trailing space in the tool name": ("oa__purchase_pay ", {"amount": 10, "vendor": "ACME"}),
    "amount missing": ("oa__purchase_pay", {"vendor": "ACME"}),
    "vendor missing": ("oa__purchase_pay", {"amount": 10}),
    "amount as a string": ("oa__purchase_pay", {"amount": "10", "vendor": "ACME"}),
    "amount as true": ("oa__purchase_pay", {"amount": True, "vendor": "ACME"}),
    "vendor as a number": ("oa__purchase_pay", {"amount": 10, "vendor": 7}),
    "units as a float": ("oa__purchase_pay", {"amount": 10, "vendor": "ACME", "units": 1.5}),
    "units as a list": ("oa__purchase_pay", {"amount": 10, "vendor": "ACME", "units": [1]}),
    "NaN amount": ("oa__purchase_pay", {"amount": float("nan"), "vendor": "ACME"}),
    "infinite amount": ("oa__purchase_pay", {"amount": float("inf"), "vendor": "ACME"}),
}


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    return write_policies(tmp_path / "policies", UP_TO_50K)


@pytest.mark.parametrize("name", list(THROUGH_THE_ENGINE))
async def test_no_hostile_amount_is_paid_past_the_policy(
        name: str, pdb: Database, policies: Path, attempt: Tally) -> None:
    PAID.clear()

    result = await run(pdb, agent(policies),
                       call("oa__purchase_pay", **THROUGH_THE_ENGINE[name]))

    attempt.record(f"Cedar policy: {name}", bool(PAID))
    assert PAID == []
    blocked = [e for e in result.trace if e["type"] == "tool_blocked"]
    assert blocked, result.trace


def test_no_bent_fact_is_allowed_by_the_policy_set(policies: Path, attempt: Tally) -> None:
    live = LivePolicySet(policies, "deny", TOOLS)
    honest = CallFacts(tool_name="oa__purchase_pay", args={"amount": 10, "vendor": "ACME"},
                       user_id="alice", org_id="acme", agent_id="buyer")
    assert live.decide(honest).effect == "allow"  # the policy does let a small payment by

    for name, (tool_name, args) in PUT_DIRECTLY.items():
        decision = live.decide(CallFacts(tool_name=tool_name, args=args, user_id="alice",
                                         org_id="acme", agent_id="buyer"))
        attempt.record(f"Cedar policy set: {name}", decision.effect != "deny")
        assert decision.effect == "deny", name
        assert decision.errors, name  # the denial says what could not be evaluated
