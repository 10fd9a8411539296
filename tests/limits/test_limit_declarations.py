"""A session_limits declaration that cannot hold stops the agent at load with one line that
names the entry and the fault; an amount the limits cannot count is refused at call time,
saying why, and on the engine path no payment happens past a cap."""

from __future__ import annotations

import math
from typing import Any

import pytest

from hookgate.catalog.build import build_registry
from hookgate.catalog.builtin.session_limits import LimitRefused, amount_units
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.services import HookServices
from hookgate.storage.database import Database
from tests.hooks_builtin.world import OA, agent, call, run, tool_events


def limits(**specs: Any) -> dict[str, Any]:
    return {"name": "session_limits", "params": {"limits": specs}}


PAY = {"tools": ["oa__purchase_pay"], "per": "user", "window": "1h"}


@pytest.mark.parametrize(("spec", "problem"), [
    ({**PAY, "window": "an hour", "count": 3}, "limits.pay.window: 'an hour' is not a window"),
    ({**PAY, "window": "0s", "count": 3}, "must be from one second to 366 days"),
    ({**PAY, "window": "400d", "count": 3}, "must be from one second to 366 days"),
    ({**PAY, "sum": "amont", "max": 5000},
     "limits.pay.sum: tool 'oa__purchase_pay' has no argument 'amont'"),
    ({**PAY, "sum": "vendor", "max": 5000},
     "argument 'vendor' of tool 'oa__purchase_pay' is string, not a number"),
    ({**PAY, "sum": "amount"}, "'sum' (the argument summed) and 'max' (its cap) go together"),
    ({**PAY, "sum": "amount", "max": math.nan}, "limits.pay.max = nan is not a finite number"),
    ({**PAY, "sum": "amount", "max": -1}, "limits.pay.max = -1 is negative"),
    ({**PAY, "sum": "amount", "max": "5000"}, "limits.pay.max is str '5000', not a number"),
    ({**PAY, "count": 0}, "limits.pay.count must be a whole number of calls of at least 1"),
    ({**PAY, "count": True}, "limits.pay.count must be a whole number"),
    ({**PAY, "per": "team", "count": 1}, "limits.pay.per must be one of user, agent, session"),
    (PAY, "limits.pay limits nothing"),
    ({**PAY, "cap": 3}, "limits.pay: unknown keys cap"),
    ({"per": "user", "window": "1h", "count": 1}, "limits.pay.tools must name the tools"),
    ({"tools": ["x"], "after_approved": "review", "per": "user"},
     "after_approved looks at the session's calls"),
])
def test_a_bad_declaration_fails_at_load_in_one_line(spec: dict[str, Any],
                                                     problem: str) -> None:
    db = Database("sqlite+aiosqlite:///unused.db")  # named, never opened
    with pytest.raises(HookBuildError) as info:
        build_registry(agent(OA(), limits(pay=spec)), HookServices(database=db))
    message = str(info.value)
    assert "hooks.class_hooks[0] 'session_limits'" in message and problem in message, message
    assert "\n" not in message


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1, -0.5, 1e300, 10**30,
                                   "2000", True, None, [1], {"v": 1}, 0.00001])
def test_an_amount_the_limits_cannot_count_is_refused(value: Any) -> None:
    with pytest.raises(LimitRefused) as info:
        amount_units("argument amount", value)
    assert str(info.value).startswith("argument amount")


def test_amounts_are_counted_exactly() -> None:
    assert amount_units("a", 2000) == 20_000_000
    assert amount_units("a", 0.1) + amount_units("a", 0.2) == amount_units("a", 0.3)
    assert amount_units("a", 0) == 0


@pytest.mark.both_databases
async def test_the_engine_runs_no_payment_past_the_cap(db: Database) -> None:
    oa = OA()
    spec = {**PAY, "sum": "amount", "max": 5000}
    result = await run(db, agent(oa, limits(pay=spec)),
                       *[call("oa__purchase_pay", amount=2000, vendor="ACME")
                         for _ in range(3)])
    events = tool_events(result)
    assert [e["status"] for e in events] == ["ok", "ok", "blocked"]
    assert events[2]["blocked_by"] == "session_limits"
    assert len(oa.payments) == 2


@pytest.mark.both_databases
async def test_a_failing_tool_gives_its_claim_back_on_the_engine_path(db: Database) -> None:
    oa = OA()
    spec = {"tools": ["oa__broken"], "per": "session", "window": "1h", "count": 1}
    result = await run(db, agent(oa, limits(broken=spec)),
                       *[call("oa__broken", note=str(i)) for i in range(3)])
    # Each call failed and gave its claim back, so none was refused by the limit.
    assert [e.get("blocked_by") for e in tool_events(result)] == [None, None, None]


@pytest.mark.both_databases
async def test_a_later_rewrite_of_the_amount_is_what_is_counted(db: Database) -> None:
    oa = OA()
    spec = {**PAY, "sum": "amount", "max": 5000}
    # 1,500 fits at the claim; the doubler makes it 3,000 after: the second 3,000 must not
    # run, though 1,500 + 1,500 was within the cap when session_limits first saw them.
    result = await run(db, agent(oa, limits(pay=spec), "tests.limits.rewriter:Doubler"),
                       *[call("oa__purchase_pay", amount=1500, vendor="ACME")
                         for _ in range(2)])
    events = tool_events(result)
    assert [e["status"] for e in events] == ["ok", "blocked"], events
    assert events[1]["blocked_by"] == "session_limits_final"
    assert [p["amount"] for p in oa.payments] == [3000]


@pytest.mark.both_databases
async def test_a_refused_reuse_of_a_call_id_does_not_free_the_claim_of_the_call_that_ran(
        db: Database) -> None:
    oa = OA()
    spec = {**PAY, "sum": "amount", "max": 5000}
    result = await run(db, agent(oa, limits(pay=spec)),
                       call("oa__purchase_pay", "c1", amount=2000, vendor="ACME"),
                       # The model sends c1's id again with an amount the cap refuses.
                       call("oa__purchase_pay", "c1", amount=9000, vendor="ACME"),
                       call("oa__purchase_pay", "c3", amount=2000, vendor="ACME"),
                       call("oa__purchase_pay", "c4", amount=2000, vendor="ACME"))
    assert [p["amount"] for p in oa.payments] == [2000, 2000], tool_events(result)
