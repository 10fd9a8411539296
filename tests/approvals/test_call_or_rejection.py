"""The gate's first read: a call's own request if it has one (a resumed call continues
with it, whatever was rejected before), else the latest request a person rejected in the
same run for the same tool and exactly the same arguments (asking again is refused), else
nothing (a new request is made). One read, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from hookgate.approvals.store import ConfirmationStore
from hookgate.storage.database import Database
from hookgate.tools.tool import args_digest

pytestmark = pytest.mark.both_databases


async def made(store: ConfirmationStore, call: str, args: dict[str, Any],
               run_id: str = "run_r") -> str:
    now = await store.db.now()
    request, created = await store.create(
        run_id=run_id, tool_call_id=call, agent_id="buyer", requested_by="alice",
        org_id="acme", mode="inline", channel_id=None, approver_scope="org_members",
        agent_owner_id=None, tool_name="oa__purchase_pay", args=args,
        args_sha256=args_digest(args), created_at=now, expires_at=now + timedelta(hours=1))
    assert created
    return request.id


async def test_the_calls_own_request_first_then_a_rejection_like_it(db: Database) -> None:
    store = ConfirmationStore(db)
    pay = {"amount": 90_000}
    first = await made(store, "c1", pay)
    assert await store.transition(first, "rejected", responded_by="bob") is not None
    later = await made(store, "c2", pay)  # the same call again, under a new id, pending
    await made(store, "c9", pay, run_id="run_other")  # another run's: never this run's

    def find(call: str, args: dict[str, Any]) -> Any:
        return store.for_call_or_rejected_like("run_r", call, "oa__purchase_pay",
                                               args_digest(args))

    own = await find("c2", pay)
    assert own is not None and (own.id, own.status) == (later, "pending")
    own = await find("c1", pay)
    assert own is not None and (own.id, own.status) == (first, "rejected")
    repeat = await find("c3", pay)  # a new call id for the rejected call: the rejection
    assert repeat is not None and (repeat.id, repeat.tool_call_id) == (first, "c1")
    assert await find("c3", {"amount": 90_001}) is None  # other arguments: nothing
    assert await store.for_call_or_rejected_like("run_other", "c3", "oa__purchase_pay",
                                                 args_digest(pay)) is None
