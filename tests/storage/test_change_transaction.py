"""A request's change and the work that commits with it (``then``: a standing rule, the
run's continuation, the announcement) run in one transaction — on PostgreSQL the backend's
driver transaction (decision record 0032), on SQLite an ORM session's — on both alike: one
decision per request however many decide at once, the work with it committed with it or
not at all, an after-commit callback and an announcement only once it committed."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from hookgate.approvals.rules import RuleBook
from hookgate.storage.approval_rules import StandingRule
from hookgate.storage.confirmations import ConfirmationRecord, ConfirmationTable, VoteExists
from hookgate.storage.database import Database
from hookgate.storage.tables import ApprovalRuleRow, ApprovalVoteRow
from hookgate.storage.transaction import Transaction, after_commit
from hookgate.storage.types import utcnow
from hookgate.tools.tool import args_digest


async def pending(table: ConfirmationTable, call: str = "c1") -> str:
    now = await table.db.now()
    args = {"amount": 90_000, "to": "ACME"}
    record, created = await table.create(
        run_id="run_r", tool_call_id=call, agent_id="buyer", requested_by="alice",
        org_id="acme", mode="inline", channel_id=None, approver_scope="org_members",
        agent_owner_id=None, tool_name="oa__purchase_pay", args=args,
        args_sha256=args_digest(args), created_at=now, expires_at=now + timedelta(hours=1))
    assert created
    return record.id


def vote_of(user: str) -> dict[str, Any]:
    return {"user_id": user, "decision": "approve", "via": "api", "channel_identity": None,
            "reason": None, "created_at": utcnow()}


async def votes(db: Database, request_id: str) -> list[str]:
    async with db.session() as s:
        return list((await s.execute(select(ApprovalVoteRow.user_id).where(
            ApprovalVoteRow.request_id == request_id))).scalars().all())


def rule_for(request_id: str, rule_id: str = "ar_test") -> StandingRule:
    return StandingRule(
        id=rule_id, org_id="acme", agent_id="buyer", tool_name="oa__purchase_pay",
        scope="org", run_id=None, user_id=None, when=None, created_by="bob",
        created_at=utcnow(), expires_at=None, from_request_id=request_id, revoked_at=None,
        revoked_by=None, uses=0, last_used_at=None)


async def rules(db: Database) -> list[str]:
    async with db.session() as s:
        return list((await s.execute(select(ApprovalRuleRow.id))).scalars().all())


async def approve(table: ConfirmationTable, request_id: str, user: str, then: Any = None
                  ) -> ConfirmationRecord | None:
    return await table.transition(request_id, "approved", now=None, unexpired=True,
                                  then=then, vote=vote_of(user), responded_by=user,
                                  decided_via="api", edited_args=None)


@pytest.mark.both_databases
async def test_of_deciders_at_once_exactly_one_decides_and_only_its_vote_is_kept(
        db: Database) -> None:
    table = ConfirmationTable(db)
    request_id = await pending(table)
    deciders = [f"p{i}" for i in range(6)]
    decided = await asyncio.gather(*(approve(table, request_id, p) for p in deciders))
    won = [d for d in decided if d is not None]
    assert len(won) == 1 and won[0].status == "approved"
    assert await votes(db, request_id) == [won[0].responded_by]
    record = await table.get(request_id)
    assert record is not None and record.responded_by == won[0].responded_by
    assert record.edited_args is None and record.responded_at is not None


@pytest.mark.both_databases
async def test_a_standing_rule_commits_with_its_approval_or_not_at_all(db: Database) -> None:
    table = ConfirmationTable(db)
    first, second = await pending(table, "c1"), await pending(table, "c2")

    async def with_rule(request_id: str) -> Any:
        async def save(tx: Transaction, after: ConfirmationRecord) -> None:
            await RuleBook.save_in(tx, rule_for(request_id))
        return save

    assert await approve(table, first, "bob", await with_rule(first)) is not None
    assert await rules(db) == ["ar_test"]
    # A rule the database refuses (its id taken) fails the approval it came with.
    with pytest.raises(Exception) as refused:
        await approve(table, second, "bob", await with_rule(second))
    assert not isinstance(refused.value, VoteExists)
    record = await table.get(second)
    assert record is not None and record.status == "pending"
    assert await votes(db, second) == []
    assert await rules(db) == ["ar_test"]
    # The rule as stored is the rule as made (times aware, columns as given).
    made = rule_for(first)
    kept = await RuleBook(db).table.get("ar_test")
    assert kept is not None and kept.created_at.utcoffset() == timedelta(0)
    assert replace(kept, created_at=made.created_at) == made


@pytest.mark.both_databases
async def test_work_that_fails_leaves_the_request_pending_and_runs_nothing_after(
        db: Database) -> None:
    table = ConfirmationTable(db)
    request_id = await pending(table)
    ran: list[str] = []

    async def fails(tx: Transaction, after: ConfirmationRecord) -> None:
        after_commit(tx, lambda: ran.append("after commit"))
        assert after.status == "approved"  # the change is made in the transaction
        raise LookupError("the continuation could not be stored")

    with pytest.raises(LookupError):
        await approve(table, request_id, "bob", fails)
    record = await table.get(request_id)
    assert record is not None and record.status == "pending"
    assert await votes(db, request_id) == []
    assert ran == []

    async def succeeds(tx: Transaction, after: ConfirmationRecord) -> None:
        after_commit(tx, lambda: ran.append("after commit"))

    assert await approve(table, request_id, "carol", succeeds) is not None
    assert ran == ["after commit"]
    assert await votes(db, request_id) == ["carol"]
    # A second vote of a person is refused, and changes nothing.
    again = await pending(table, "c2")
    async with db.transaction() as s:
        s.add(ApprovalVoteRow(request_id=again, **vote_of("carol")))
    with pytest.raises(VoteExists):
        await approve(table, again, "carol")
    record = await table.get(again)
    assert record is not None and record.status == "pending"


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_an_announcement_is_heard_only_once_its_change_committed(
        db: Database, database_url: str) -> None:
    import psycopg

    table = ConfirmationTable(db)
    first, second = await pending(table, "c1"), await pending(table, "c2")
    dsn = make_url(database_url).set(drivername="postgresql").render_as_string(
        hide_password=False)
    listener = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    heard: list[str] = []

    async def hear() -> None:
        async for note in listener.notifies():
            heard.append(note.payload)

    try:
        await listener.execute("LISTEN hookgate_test_changes")
        task = asyncio.create_task(hear())
        held: list[list[str]] = []

        async def announce(tx: Transaction, after: ConfirmationRecord) -> None:
            await db.notify(tx, "hookgate_test_changes", f"{after.id} it's \\ done")
            await asyncio.sleep(0.3)
            held.append(list(heard))  # not heard while the transaction is open

        async def announce_then_fail(tx: Transaction, after: ConfirmationRecord) -> None:
            await db.notify(tx, "hookgate_test_changes", after.id)
            raise LookupError("failed after the announcement was queued")

        async def announce_a_nul(tx: Transaction, after: ConfirmationRecord) -> None:
            await db.notify(tx, "hookgate_test_changes", after.id + "\x00")

        with pytest.raises(LookupError):
            await approve(table, second, "bob", announce_then_fail)
        with pytest.raises(ValueError):  # no text value holds one: refused, rolled back
            await approve(table, second, "bob", announce_a_nul)
        record = await table.get(second)
        assert record is not None and record.status == "pending"
        assert await approve(table, first, "bob", announce) is not None
        for _ in range(50):
            if heard:
                break
            await asyncio.sleep(0.05)
        task.cancel()
        assert held == [[]]
        assert heard == [f"{first} it's \\ done"]  # the failed one's never: rolled back
    finally:
        await listener.close()


@pytest.mark.perf  # round trips: a performance internal
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_a_change_commits_on_the_driver_in_four_round_trips(db: Database) -> None:
    """BEGIN; the compare-and-set with the vote; one statement of the work with it; its
    announcement with the COMMIT. Nothing goes through SQLAlchemy's engine."""
    table = ConfirmationTable(db)
    request_id = await pending(table)
    before = db.queries

    async def work(tx: Transaction, after: ConfirmationRecord) -> None:
        from hookgate.storage.transaction import statements

        assert (await (await statements(tx)).fetchrow("SELECT 1"))[0] == 1
        await db.notify(tx, "hookgate_test_changes", after.id)

    import asyncpg

    simple: list[str] = []  # whole messages, the simple protocol's
    extended: list[str] = []  # statements with parameters, prepared
    execute, prepared = asyncpg.Connection.execute, asyncpg.Connection._execute

    async def traced_execute(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        if not args:
            simple.append(query)
        return await execute(self, query, *args, **kwargs)

    async def traced_prepared(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        extended.append(query)
        return await prepared(self, query, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(asyncpg.Connection, "execute", traced_execute)
        patch.setattr(asyncpg.Connection, "_execute", traced_prepared)
        assert await approve(table, request_id, "bob", work) is not None
    assert db.queries == before  # nothing through SQLAlchemy
    assert simple[0] == "BEGIN"
    assert simple[1].startswith("SELECT pg_notify(") and simple[1].endswith("; COMMIT")
    assert len(simple) == 2
    assert [q.split()[0] for q in extended] == ["WITH", "SELECT"]


@pytest.mark.both_databases
async def test_a_request_changed_without_a_vote_or_at_a_given_time_is_as_asked(
        db: Database) -> None:
    table = ConfirmationTable(db)
    request_id = await pending(table)
    at = utcnow() + timedelta(seconds=5)
    after = await table.transition(request_id, "cancelled", now=at, unexpired=False,
                                   then=None, reason="the run was cancelled")
    assert after is not None and after.status == "cancelled"
    assert after.responded_at == at and after.reason == "the run was cancelled"
    assert await table.transition(request_id, "expired", now=None, unexpired=False,
                                  then=None) is None
    async with db.session() as s:
        assert (await s.execute(select(func.count()).select_from(ApprovalVoteRow))
                ).scalar_one() == 0
