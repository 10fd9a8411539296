"""The run layer's hot writes on the raw driver paths: a checkpoint and its events commit together
or not at all, under the run's fence; the event log reads back what was written; the
ledger claims each call once; the SQLite driver's group commit keeps each write's outcome
its own."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from sqlalchemy import text

from hookgate.engines.events import RunEvent
from hookgate.engines.interrupts import Fenced
from hookgate.engines.state import RunState
from hookgate.storage.backends import pg_driver
from hookgate.storage.backends.sqlite_driver import SqliteDriver
from hookgate.storage.database import Database
from hookgate.storage.fencing import take_over
from hookgate.storage.ledger import DatabaseLedger
from hookgate.storage.run_events import RunEventLog
from hookgate.storage.runs import DatabaseRunStore

ODD = {"text": "é 🙂 \u2028", "nested": {"list": [1, 2.5, None, True]}, "n": 10**15}


def state(status: str = "running") -> RunState:
    return RunState(run_id="run_w1", agent_id="buyer", user_id="alice", org_id="acme",
                    message="pay", status=status)  # type: ignore[arg-type]


async def stored(db: Database, run_id: str) -> tuple[str | None, int]:
    async with db.session() as s:
        status = (await s.execute(text("SELECT status FROM runs WHERE id = :i"),
                                  {"i": run_id})).scalar_one_or_none()
        events = (await s.execute(text("SELECT count(*) FROM run_events WHERE run_id = :i"),
                                  {"i": run_id})).scalar_one()
    return status, int(events)


@pytest.mark.both_databases
async def test_a_checkpoint_and_its_events_are_stored_together(db: Database) -> None:
    store, log = DatabaseRunStore(db), RunEventLog(db)
    run = state()
    await store.save(run)
    run.status = "completed"
    run.answer = "done"
    events = [RunEvent("answer", {"answer": "done", **ODD}, 1),
              RunEvent("done", {"status": "completed"}, 2)]
    await store.save(run, events=events)

    loaded = await store.load(run.run_id)
    assert loaded is not None and (loaded.status, loaded.answer) == ("completed", "done")
    row = await store.row(run.run_id)
    assert row is not None and (row.status, row.answer, row.org_id) == ("completed", "done",
                                                                        "acme")
    assert [(e.type, e.seq, e.data) for e in await log.after(run.run_id)] == [
        ("answer", 1, {"answer": "done", **ODD}), ("done", 2, {"status": "completed"})]
    assert [e.seq for e in await log.after(run.run_id, 1)] == [2]
    summary = await store.summary(run.run_id)
    assert summary is not None and (summary.org_id, summary.status) == ("acme", "completed")
    assert RunState.from_json(summary.state_json) == run
    assert await store.summary("run_missing") is None
    # A seq already stored keeps what it had.
    await log.append(run.run_id, [RunEvent("answer", {"answer": "other"}, 1)])
    assert (await log.after(run.run_id))[0].data["answer"] == "done"


@pytest.mark.both_databases
async def test_a_fenced_out_checkpoint_stores_neither_the_state_nor_its_events(
        db: Database) -> None:
    store, log = DatabaseRunStore(db), RunEventLog(db)
    run = state()
    await store.save(run)
    old = await take_over(db, run.run_id)
    new = await take_over(db, run.run_id)
    assert old is not None and new is not None
    run.status = "completed"
    with pytest.raises(Fenced):
        await store.save(run, fence=old, events=[RunEvent("done", {}, 1)])
    with pytest.raises(Fenced):
        await log.append(run.run_id, [RunEvent("done", {}, 1)], fence=old)
    assert await stored(db, run.run_id) == ("running", 0)
    await store.save(run, fence=new, events=[RunEvent("done", {}, 1)])
    assert await stored(db, run.run_id) == ("completed", 1)
    row = await store.row(run.run_id)
    assert row is not None and row.fence == new.token  # a checkpoint leaves the fence be


@pytest.mark.both_databases
async def test_a_delegated_childs_writes_count_its_roots_fence(db: Database) -> None:
    # A parked child checkpoints and claims under its root's fence: a takeover of the root
    # fences the child's writes out too, whatever the child's own row says.
    store, log, ledger = DatabaseRunStore(db), RunEventLog(db), DatabaseLedger(db)
    root = state()
    child = RunState(run_id="run_w1_child", agent_id="clerk", user_id="alice", org_id="acme",
                     message="pay", status="running")  # type: ignore[arg-type]
    await store.save(root)
    await store.save(child)
    old = await take_over(db, root.run_id)
    assert old is not None
    child.status = "awaiting_approval"
    await store.save(child, fence=old, events=[RunEvent("tool_call", {}, 1)])
    await log.append(child.run_id, [RunEvent("note", {}, 2)], fence=old)
    assert await ledger.claim(child.run_id, "c1", "pay", "ab" * 32, fence=old) is None
    assert await stored(db, child.run_id) == ("awaiting_approval", 2)
    new = await take_over(db, root.run_id)
    assert new is not None
    child.status = "completed"
    with pytest.raises(Fenced):
        await store.save(child, fence=old, events=[RunEvent("done", {}, 3)])
    with pytest.raises(Fenced):
        await log.append(child.run_id, [RunEvent("done", {}, 3)], fence=old)
    with pytest.raises(Fenced):
        await ledger.claim(child.run_id, "c2", "pay", "ab" * 32, fence=old)
    assert await stored(db, child.run_id) == ("awaiting_approval", 2)
    assert await ledger.recorded(child.run_id, "c2") is None
    await store.save(child, fence=new, events=[RunEvent("done", {}, 3)])
    assert await stored(db, child.run_id) == ("completed", 3)


@pytest.mark.both_databases
async def test_racing_fenced_claims_of_one_call_let_one_win_and_tell_the_rest(
        db: Database) -> None:
    await DatabaseRunStore(db).save(state())
    fence = await take_over(db, "run_w1")
    assert fence is not None
    ledger = DatabaseLedger(db).fenced(fence)
    won = await asyncio.gather(*(ledger.claim("run_w1", "c9", "pay", "ef" * 32)
                                 for _ in range(8)))
    assert sum(p is None for p in won) == 1
    assert all(p.tool_name == "pay" and p.args_sha256 == "ef" * 32
               for p in won if p is not None)


@pytest.mark.both_databases
async def test_the_ledger_claims_a_call_once_and_answers_a_repeat_with_its_record(
        db: Database) -> None:
    await DatabaseRunStore(db).save(state())
    ledger = DatabaseLedger(db)
    assert await ledger.claim("run_w1", "c1", "pay", "ab" * 32) is None
    prior = await ledger.claim("run_w1", "c1", "pay", "ab" * 32)
    assert prior is not None and (prior.observation, prior.ok) == (None, None)
    await ledger.finish("run_w1", "c1", "paid 70", True)
    prior = await ledger.claim("run_w1", "c1", "other", "cd" * 32)
    assert prior is not None
    assert (prior.observation, prior.ok, prior.tool_name, prior.args_sha256) == (
        "paid 70", True, "pay", "ab" * 32)
    # Racing claims of one call: exactly one wins.
    won = await asyncio.gather(*(ledger.claim("run_w1", "c2", "pay", "ef" * 32)
                                 for _ in range(8)))
    assert sum(p is None for p in won) == 1


@pytest.mark.both_databases
async def test_a_fenced_out_executor_claims_nothing(db: Database) -> None:
    await DatabaseRunStore(db).save(state())
    old = await take_over(db, "run_w1")
    new = await take_over(db, "run_w1")
    assert old is not None and new is not None
    ledger = DatabaseLedger(db)
    with pytest.raises(Fenced):
        await ledger.claim("run_w1", "c1", "pay", "ab" * 32, fence=old)
    assert await ledger.fenced(new).claim("run_w1", "c1", "pay", "ab" * 32) is None
    assert await ledger.claim("run_w1", "c1", "pay", "ab" * 32, fence=new) is not None


async def test_writes_sharing_a_group_commit_keep_their_own_outcomes(db: Database) -> None:
    # (the default backend: a SQLite file)
    driver = db.backend.driver
    assert isinstance(driver, SqliteDriver)
    await driver.write(lambda c: c.execute("CREATE TABLE t (k INTEGER PRIMARY KEY)"))

    def write(k: int) -> Callable[[sqlite3.Connection], int]:
        def work(c: sqlite3.Connection) -> int:
            c.execute("INSERT INTO t (k) VALUES (?)", (k,))
            if k % 3 == 0:
                c.execute("INSERT INTO t (k) VALUES (?)", (k,))  # fails: its first row goes too
            return k
        return work

    outcomes = await asyncio.gather(*(driver.write(write(k)) for k in range(1, 31)),
                                    return_exceptions=True)
    failed = [k for k, o in zip(range(1, 31), outcomes, strict=True)
              if isinstance(o, sqlite3.IntegrityError)]
    assert failed == [k for k in range(1, 31) if k % 3 == 0]
    assert [o for o in outcomes if not isinstance(o, BaseException)] == [
        k for k in range(1, 31) if k % 3]
    rows = await driver.read(lambda c: [r[0] for r in c.execute("SELECT k FROM t ORDER BY k")])
    assert rows == [k for k in range(1, 31) if k % 3]
    # Writes that have to wait for the write lock (held here by another connection, as
    # another process would) queue on the driver's thread; every one of them is stored.
    await writes_waiting_for_the_lock(driver, range(100, 140))
    assert len(await driver.read(lambda c: c.execute("SELECT k FROM t WHERE k >= 100")
                               .fetchall())) == 40


@pytest.mark.perf  # how many commits: a performance internal
async def test_writes_waiting_for_the_lock_share_their_commits(db: Database) -> None:
    driver = db.backend.driver
    assert isinstance(driver, SqliteDriver)
    await driver.write(lambda c: c.execute("CREATE TABLE t (k INTEGER PRIMARY KEY)"))
    commits: list[str] = []
    loop = asyncio.get_running_loop()
    on_thread = partial(loop.run_in_executor, driver._executor)
    await on_thread(lambda: (driver._conn or driver._connect()).set_trace_callback(commits.append))
    await writes_waiting_for_the_lock(driver, range(100, 140))
    await on_thread(lambda: (driver._conn or driver._connect()).set_trace_callback(None))
    assert 1 <= sum(s == "COMMIT" for s in commits) < 40


async def writes_waiting_for_the_lock(driver: SqliteDriver, keys: range) -> None:
    """Inserts ``keys`` into table t while another connection holds the write lock, checks
    the event loop is not blocked while they wait, then lets them through."""
    holder = sqlite3.connect(driver.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    waiting = asyncio.gather(*(driver.write(lambda c, k=k: c.execute(
        "INSERT INTO t (k) VALUES (?)", (k,))) for k in keys))
    ticks = 0
    for _ in range(10):  # the event loop is not blocked while they wait for the lock
        await asyncio.sleep(0.005)
        ticks += 1
    assert ticks == 10 and not waiting.done()
    holder.execute("COMMIT")
    holder.close()
    await waiting


async def test_a_write_with_the_lock_free_runs_on_the_callers_thread(db: Database) -> None:
    driver = db.backend.driver
    assert isinstance(driver, SqliteDriver)
    await driver.write(lambda c: c.execute("CREATE TABLE u (k INTEGER PRIMARY KEY)"))
    here = threading.get_ident()
    where = await driver.write(lambda c: (c.execute("INSERT INTO u VALUES (1)"),
                                        threading.get_ident())[1])
    assert where == here  # no hop to the driver's thread and back
    # Committed: another connection sees it at once.
    other = sqlite3.connect(driver.path)
    assert other.execute("SELECT k FROM u").fetchall() == [(1,)]
    # A write that raises leaves nothing, and the next one starts clean.
    with pytest.raises(sqlite3.IntegrityError):
        await driver.write(lambda c: (c.execute("INSERT INTO u VALUES (2)"),
                                    c.execute("INSERT INTO u VALUES (1)")))
    assert other.execute("SELECT k FROM u").fetchall() == [(1,)]
    # With the lock taken elsewhere, the write goes to the driver's thread and waits there.
    other.isolation_level = None
    other.execute("BEGIN IMMEDIATE")
    pending = asyncio.ensure_future(driver.write(lambda c: (
        c.execute("INSERT INTO u VALUES (3)"), threading.get_ident())[1]))
    await asyncio.sleep(0.05)
    assert not pending.done()
    other.execute("COMMIT")
    assert await pending != here
    assert await driver.read(lambda c: [r[0] for r in c.execute("SELECT k FROM u")]) == [1, 3]
    other.close()


async def test_a_file_not_in_wal_mode_writes_on_the_driver_thread(tmp_path: Path) -> None:
    # Outside WAL mode a reader can wait for a writer and every commit fsyncs: nothing runs
    # on the caller's thread, and the writes are stored all the same.
    path = tmp_path / "rollback-journal.db"
    sqlite3.connect(path).execute("PRAGMA journal_mode=DELETE").fetchone()
    db = Database(f"sqlite+aiosqlite:///{path}")
    try:
        driver = db.backend.driver
        assert isinstance(driver, SqliteDriver)
        await driver.write(lambda c: c.execute("CREATE TABLE v (k INTEGER PRIMARY KEY)"))
        where = await driver.write(lambda c: (c.execute("INSERT INTO v VALUES (1)"),
                                            threading.get_ident())[1])
        assert where != threading.get_ident()
        assert await driver.read(lambda c: c.execute("SELECT k FROM v").fetchall()) == [(1,)]
    finally:
        await db.dispose()


@pytest.mark.both_databases
@pytest.mark.parametrize("own", [pg_driver.OWN_CONNECTIONS, 0], ids=["own", "borrowed"])
async def test_a_summary_with_its_log_reads_the_row_and_every_event(
        db: Database, own: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # On PostgreSQL the driver's own connections (asyncpg) and borrowed ones (psycopg) alike.
    monkeypatch.setattr(pg_driver, "OWN_CONNECTIONS", own)
    store = DatabaseRunStore(db, trace_in_log=True)
    assert await store.summary("run_missing", with_log=True) is None
    run = state()
    await store.save(run)
    bare = await store.summary(run.run_id, with_log=True)
    assert bare is not None and bare.logged == [] and bare.status == "running"
    events = [RunEvent("tool_call", {"args": ODD, "quote": "\"'\\"}, 1),
              RunEvent("tool_result", {}, 2), RunEvent("done", {"status": "completed"}, 3)]
    run.status = "completed"
    await store.save(run, events=events[:2])
    await RunEventLog(db).append(run.run_id, events[2:])
    found = await store.summary(run.run_id, with_log=True)
    assert found is not None and (found.org_id, found.status) == ("acme", "completed")
    assert found.logged == events == await RunEventLog(db).after(run.run_id)
    assert found.logged[0].data["args"] == ODD
    plain = await store.summary(run.run_id)
    assert plain is not None and plain.logged is None
