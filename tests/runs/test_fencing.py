"""Fencing tokens on a real PostgreSQL: once a run is taken over, the previous executor's
checkpoints, event appends and tool claims are refused, and the new one's go through."""

from __future__ import annotations

import asyncio

import pytest

from hookgate.engines.events import RunEvent
from hookgate.engines.interrupts import Fenced
from hookgate.engines.state import RunState
from hookgate.storage.database import Database
from hookgate.storage.fencing import take_over
from hookgate.storage.ledger import DatabaseLedger
from hookgate.storage.run_events import RunEventLog
from hookgate.storage.runs import DatabaseRunStore


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_a_taken_over_executor_can_write_nothing(db: Database) -> None:
    store, log, ledger = DatabaseRunStore(db), RunEventLog(db), DatabaseLedger(db)
    state = RunState(agent_id="a", message="m")
    await store.save(state)
    old = await take_over(db, state.run_id)
    new = await take_over(db, state.run_id)
    assert old is not None and new is not None and new.token == old.token + 1
    assert await take_over(db, "run_missing") is None

    state.status = "awaiting_approval"
    with pytest.raises(Fenced):
        await store.save(state, fence=old)
    with pytest.raises(Fenced):
        await log.append(state.run_id, [RunEvent("done", {"status": "completed"}, 1)],
                         fence=old)
    with pytest.raises(Fenced):
        await ledger.fenced(old).claim(state.run_id, "c1", "pay", "digest")
    stored = await store.load(state.run_id)
    assert stored is not None and stored.status == "running"
    assert await log.after(state.run_id) == []

    # The current holder writes, and the claim it made is the one the ledger keeps.
    await store.save(state, fence=new)
    await log.append(state.run_id, [RunEvent("tool_call", {}, 1)], fence=new)
    assert await ledger.fenced(new).claim(state.run_id, "c1", "pay", "digest") is None
    prior = await ledger.fenced(new).claim(state.run_id, "c1", "pay", "digest")
    assert prior is not None and prior.observation is None
    stored = await store.load(state.run_id)
    assert stored is not None and stored.status == "awaiting_approval"
    assert [e.type for e in await log.after(state.run_id)] == ["tool_call"]


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_a_takeover_waits_for_writes_in_flight_and_claims_never_wait_for_checkpoints(
        db: Database) -> None:
    store, log, ledger = DatabaseRunStore(db), RunEventLog(db), DatabaseLedger(db)
    state = RunState(agent_id="a", message="m")
    await store.save(state)
    old = await take_over(db, state.run_id)
    assert old is not None

    # An event append of the current holder is in flight: a takeover waits for its commit.
    async with db.transaction() as s:
        await old.check(s)
        taking = asyncio.create_task(take_over(db, state.run_id))
        await asyncio.sleep(0.3)
        assert not taking.done()
    new = await asyncio.wait_for(taking, 5)
    assert new is not None and new.token == old.token + 1

    # A checkpoint's transaction is open: the holder's tool claim and event append go
    # through meanwhile (they no longer queue behind it), and a takeover still waits.
    async with db.transaction() as s:
        state.status = "awaiting_approval"
        await store.save(state, fence=new, session=s)
        assert await asyncio.wait_for(
            ledger.fenced(new).claim(state.run_id, "c1", "pay", "digest"), 5) is None
        await asyncio.wait_for(
            log.append(state.run_id, [RunEvent("tool_call", {}, 1)], fence=new), 5)
        taking = asyncio.create_task(take_over(db, state.run_id))
        await asyncio.sleep(0.3)
        assert not taking.done()
    newest = await asyncio.wait_for(taking, 5)
    assert newest is not None and newest.token == new.token + 1
    stored = await store.load(state.run_id)
    assert stored is not None and stored.status == "awaiting_approval"
    with pytest.raises(Fenced):
        await ledger.fenced(new).claim(state.run_id, "c2", "pay", "digest")
