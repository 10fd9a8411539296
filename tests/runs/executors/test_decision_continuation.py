"""A decision continues its parked run on the deciding instance, its job taken in the
decision's own transaction (no NOTIFY, no fetch); and a decision that lands while a job of
its run still runs is woken by that job's finish, not left for the worker's next poll (heard
on the process's one LISTEN connection, which the worker shares with the wake-ups).

One server on one PostgreSQL database for the module; its worker polls once a minute, so a
continuation that only the poll would find fails the tests' 15 s waits."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from procrastinate.jobs import Status

from hookgate.approvals.eligibility import Approver
from hookgate.approvals.records import ConfirmationRequest
from hookgate.runs.executors.settings import WorkerSettings
from tests.live_server import LiveServer, live_server
from tests.polling import wait_for
from tests.server.demo_world import Ledger, auth, world
from tests.server.test_api import wait_run

#: Every job inserted, with the status it was inserted with.
RECORD_INSERTS = (
    "CREATE TABLE inserted_jobs (id bigint, lock text, status text, worker_id bigint)",
    "CREATE FUNCTION record_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO inserted_jobs VALUES (NEW.id, NEW.lock, NEW.status::text, NEW.worker_id); "
    "RETURN NEW; END $$",
    "CREATE TRIGGER record_insert AFTER INSERT ON procrastinate_jobs "
    "FOR EACH ROW EXECUTE FUNCTION record_insert()",
)


class World:
    def __init__(self, srv: LiveServer, client: httpx.Client, bank: Ledger, dsn: str) -> None:
        self.srv, self.client, self.bank, self.dsn = srv, client, bank, dsn

    def sql(self, statement: str, *args: Any) -> list[Any]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cur = conn.execute(statement, args)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def parked_run(self) -> tuple[str, str]:
        """A new run waiting for approval with no job of it queued or running: its id
        and its request's."""
        r = self.client.post("/api/runs", json={"agent_id": "buyer", "message": "pay ACME"},
                             headers=auth("alice"))
        assert r.status_code == 200, r.text
        run_id = r.json()["run_id"]
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            pending = [p for p in self.client.get(
                "/api/confirmations", params={"status": "pending"},
                headers=auth("alice")).json() if p["run_id"] == run_id]
            jobs = self.sql("SELECT count(*) FROM procrastinate_jobs WHERE lock = %s "
                            "AND status IN ('todo', 'doing')", run_id)
            if pending and jobs == [(0,)]:
                return run_id, pending[0]["id"]
            time.sleep(0.02)
        raise AssertionError(f"run {run_id} did not park")

    def approve(self, request_id: str) -> None:
        r = self.client.post(f"/api/confirmations/{request_id}/respond",
                             json={"decision": "approve"}, headers=auth("alice"))
        assert r.status_code == 200, r.text


@pytest.fixture(scope="module")
def w(postgres_server_url: str) -> Iterator[World]:
    from tests.conftest import _drop_pg_database, _fresh_pg_database

    url = _fresh_pg_database(postgres_server_url)
    deployment, bank = world(url)
    deployment.worker = WorkerSettings(heartbeat_s=60.0, stalled_after_s=600.0, poll_s=60.0)
    try:
        with live_server(deployment) as srv, httpx.Client(base_url=srv.url,
                                                          timeout=20) as client:
            found = World(srv, client, bank,
                          url.replace("postgresql+asyncpg://", "postgresql://"))
            for statement in RECORD_INSERTS:
                found.sql(statement)
            yield found
    finally:
        _drop_pg_database(postgres_server_url, url)


def test_a_decision_continues_the_parked_run_on_the_deciding_instance(w: World) -> None:
    run_id, request_id = w.parked_run()
    paid = len(w.bank.payments)
    w.approve(request_id)
    assert wait_run(w.client, run_id)["status"] == "completed"
    assert len(w.bank.payments) == paid + 1
    # The continuation was inserted already taken by this instance's worker, in the
    # decision's transaction: never queued for a worker to fetch.
    taken = w.srv.runtime.runs.executor.taken  # type: ignore[union-attr]
    continuation = w.sql("SELECT status, worker_id FROM inserted_jobs WHERE lock = %s "
                         "ORDER BY id OFFSET 1", run_id)
    assert continuation == [("doing", taken.worker_id)]
    assert w.sql("SELECT count(*) FROM procrastinate_jobs WHERE lock = %s", run_id) == [(0,)]


def test_a_decision_while_a_job_of_its_run_runs_goes_on_when_that_job_finishes(
        w: World) -> None:
    run_id, request_id = w.parked_run()
    taken = w.srv.runtime.runs.executor.taken  # type: ignore[union-attr]
    jobs = w.srv.runtime.runs.executor.app.job_manager  # type: ignore[union-attr]
    # A job of the run running (as while the run is still parking): the decision cannot
    # take the continuation, so it is queued behind that job's lock.
    (busy,), = w.sql("INSERT INTO procrastinate_jobs (queue_name, task_name, lock, args, "
                     "status, worker_id) VALUES ('hookgate_runs', 'hookgate.advance_run', "
                     "%s, '{}', 'doing', %s) RETURNING id", run_id, taken.worker_id)
    paid = len(w.bank.payments)
    w.approve(request_id)
    assert w.sql("SELECT status FROM procrastinate_jobs WHERE lock = %s AND id <> %s",
                 run_id, busy) == [("todo",)]
    assert w.bank.payments[paid:] == []
    # Its finish notifies the queue: the continuation runs now, not at the next poll (a
    # minute here, past wait_run's 15 s). The worker hears it on the process's one LISTEN
    # connection, the wake-ups' (every listening backend spends a transaction per NOTIFY).
    shared = w.srv.runtime.pg_notifications
    assert shared is not None and any(c.startswith("procrastinate") for c in shared._handlers)
    w.srv.call(jobs.finish_job_by_id_async(busy, Status.SUCCEEDED, delete_job=True))
    assert wait_run(w.client, run_id)["status"] == "completed"
    assert len(w.bank.payments) == paid + 1


def test_a_decision_landing_as_its_run_parks_continues_it_once(w: World) -> None:
    # A decider as fast as can be: every request is approved the instant it exists (a
    # listener of the approvals, on the server's loop), while its run is still parking. The
    # parking call does not read back the request it has just made, so the decision lands
    # between the request and the parked checkpoint; the continuation it queued behind the
    # run's own job must still run, once: no run left waiting, no call paid twice.
    approvals = w.srv.runtime.approvals
    decisions: list[asyncio.Task[Any]] = []
    active = [True]

    def approve_at_once(request: ConfirmationRequest) -> None:
        if active[0] and request.pending:
            decisions.append(asyncio.get_running_loop().create_task(
                approvals.decide(request.id, "approve", Approver("alice", "acme"))))

    approvals.on_change(approve_at_once)
    paid = len(w.bank.payments)
    try:
        run_ids = []
        for _ in range(5):
            r = w.client.post("/api/runs", json={"agent_id": "buyer", "message": "pay ACME"},
                              headers=auth("alice"))
            assert r.status_code == 200, r.text
            run_ids.append(r.json()["run_id"])
        assert [wait_run(w.client, run_id)["status"] for run_id in run_ids] == [
            "completed"] * 5
    finally:
        active[0] = False
    assert len(decisions) == 5  # each request was decided by the listener, as it appeared
    assert len(w.bank.payments) == paid + 5
    for run_id in run_ids:
        assert w.sql("SELECT count(*) FROM tool_executions WHERE run_id = %s", run_id) == [(1,)]
        assert w.sql("SELECT count(*) FROM procrastinate_jobs WHERE lock = %s",
                     run_id) == [(0,)]


#: An advisory lock key the test holds to keep a finishing job's statement open.
HELD_FINISH_KEY = 4242
#: The finish of an advance job waits, inside its statement (its snapshot taken), for the
#: test to let it go: the moment a decision can commit unseen by that snapshot.
HOLD_FINISH = (
    "CREATE FUNCTION hold_finish() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    f"PERFORM pg_advisory_xact_lock_shared({HELD_FINISH_KEY}); RETURN OLD; END $$",
    "CREATE TRIGGER hold_finish BEFORE DELETE ON procrastinate_jobs FOR EACH ROW "
    "WHEN (OLD.task_name = 'hookgate.advance_run') EXECUTE FUNCTION hold_finish()",
)
#: Backends of this database waiting for a lock: (advisory ones, other ones).
WAITING = ("SELECT count(*) FILTER (WHERE l.locktype = 'advisory'), "
           "count(*) FILTER (WHERE l.locktype <> 'advisory') FROM pg_locks l "
           "JOIN pg_stat_activity a ON a.pid = l.pid "
           "WHERE NOT l.granted AND a.datname = current_database()")
#: Fetches of the worker that ended since a time ($1).
FETCHED_SINCE = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                 "AND state = 'idle' AND query LIKE '%%procrastinate_fetch_job%%' "
                 "AND query_start > %s")


def until(what: str, check: Any) -> Any:
    """``check()``'s value once it is true, read every 10 ms (the races held here last
    moments)."""
    return wait_for(check, what, timeout=15, every=0.01)


def test_a_decision_committed_while_its_runs_job_finishes_is_not_left_to_the_poll(
        w: World) -> None:
    # The run's job J1 finishes (its run parked) in one statement; a decision landing after
    # that statement's snapshot but before its commit queues J2 behind J1's lock, and the
    # worker woken by J2's NOTIFY skips it (J1 still holds the lock). J1's finish must still
    # wake J2: here the finish is held open (after its snapshot) until the decision went
    # through and the worker's fetch came back empty; the poll is a minute away.
    for statement in HOLD_FINISH:
        w.sql(statement)
    holder = psycopg.connect(w.dsn, autocommit=True)
    decided: list[int] = []
    try:
        holder.execute("SELECT pg_advisory_lock(%s)", (HELD_FINISH_KEY,))
        paid = len(w.bank.payments)
        r = w.client.post("/api/runs", json={"agent_id": "buyer", "message": "pay ACME"},
                          headers=auth("alice"))
        assert r.status_code == 200, r.text
        run_id = r.json()["run_id"]
        # J1's finish waits inside its statement: the run parked, its request pending.
        until("the finish held", lambda: w.sql(WAITING)[0][0] == 1)
        (request_id,), = w.sql("SELECT id FROM confirmation_requests WHERE run_id = %s "
                               "AND status = 'pending'", run_id)
        (since,), = w.sql("SELECT clock_timestamp()")

        def approve() -> None:
            with httpx.Client(base_url=w.srv.url, timeout=20) as client:
                decided.append(client.post(f"/api/confirmations/{request_id}/respond",
                                           json={"decision": "approve"},
                                           headers=auth("alice")).status_code)

        deciding = threading.Thread(target=approve)
        deciding.start()
        # Either the decision committed its continuation behind J1 and the worker's fetch
        # it woke came back without it, or the decision waits for J1's finish to commit.
        until("the decision queued and fetched past, or waiting for the finish", lambda: (
            w.sql(WAITING)[0][1] > 0
            or (w.sql("SELECT count(*) FROM procrastinate_jobs WHERE lock = %s "
                      "AND status = 'todo'", run_id) == [(1,)]
                and w.sql(FETCHED_SINCE, since)[0][0] > 0)))
    finally:
        holder.execute("SELECT pg_advisory_unlock(%s)", (HELD_FINISH_KEY,))
        holder.close()
        w.sql("DROP TRIGGER hold_finish ON procrastinate_jobs")
        w.sql("DROP FUNCTION hold_finish()")
    deciding.join(20)
    assert decided == [200]
    assert wait_run(w.client, run_id)["status"] == "completed"
    assert len(w.bank.payments) == paid + 1
    assert w.sql("SELECT count(*) FROM tool_executions WHERE run_id = %s", run_id) == [(1,)]


#: An advisory lock key the test holds to keep the worker's fetch of a decoy job open.
HELD_FETCH_KEY = 4243
#: A decoy job's fetch waits, inside the fetch's statement (its snapshot taken), for the
#: test to let it go, then takes nothing (the row is left as it was): an empty fetch.
HOLD_FETCH = (
    "CREATE FUNCTION hold_fetch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    f"PERFORM pg_advisory_xact_lock_shared({HELD_FETCH_KEY}); RETURN NULL; END $$",
    "CREATE TRIGGER hold_fetch BEFORE UPDATE ON procrastinate_jobs FOR EACH ROW "
    "WHEN (OLD.task_name = 'test.decoy') EXECUTE FUNCTION hold_fetch()",
)


def test_a_wake_up_heard_while_the_worker_fetches_in_vain_is_not_forgotten(
        w: World) -> None:
    # procrastinate's worker clears its wake-up after each fetch: a NOTIFY heard while a
    # fetch runs that then finds nothing (its snapshot older than what was notified) would
    # be forgotten until the next poll, a minute away. Here the worker's fetch is held on a
    # decoy job while the finish of the job holding a run's lock wakes its continuation.
    run_id, request_id = w.parked_run()
    taken = w.srv.runtime.runs.executor.taken  # type: ignore[union-attr]
    jobs = w.srv.runtime.runs.executor.app.job_manager  # type: ignore[union-attr]
    shared = w.srv.runtime.pg_notifications
    assert shared is not None
    heard: list[str] = []

    def hear(payload: str | None) -> None:
        if payload is not None:
            heard.append(payload)

    (busy,), = w.sql("INSERT INTO procrastinate_jobs (queue_name, task_name, lock, args, "
                     "status, worker_id) VALUES ('hookgate_runs', 'hookgate.advance_run', "
                     "%s, '{}', 'doing', %s) RETURNING id", run_id, taken.worker_id)
    for statement in HOLD_FETCH:
        w.sql(statement)
    holder = psycopg.connect(w.dsn, autocommit=True)
    try:
        paid = len(w.bank.payments)
        w.approve(request_id)  # queued behind the busy job
        (queued,), = w.sql("SELECT id FROM procrastinate_jobs WHERE lock = %s "
                           "AND status = 'todo'", run_id)
        w.srv.call(shared.add("procrastinate_any_queue_v1", hear))
        holder.execute("SELECT pg_advisory_lock(%s)", (HELD_FETCH_KEY,))
        w.sql("INSERT INTO procrastinate_jobs (queue_name, task_name, args, status) "
              "VALUES ('hookgate_runs', 'test.decoy', '{}', 'todo')")
        until("the worker's fetch held on the decoy", lambda: w.sql(WAITING)[0][0] == 1)
        # The busy job's finish wakes the continuation while that fetch still runs.
        w.srv.call(jobs.finish_job_by_id_async(busy, Status.SUCCEEDED, delete_job=True))
        until("the continuation's wake-up heard", lambda: any(
            f'"job_id" : {queued}' in p for p in heard))
    finally:
        holder.execute("SELECT pg_advisory_unlock(%s)", (HELD_FETCH_KEY,))
        holder.close()
        w.srv.call(_discard(shared, "procrastinate_any_queue_v1", hear))
        w.sql("DROP TRIGGER hold_fetch ON procrastinate_jobs")
        w.sql("DROP FUNCTION hold_fetch()")
        w.sql("DELETE FROM procrastinate_jobs WHERE task_name = 'test.decoy'")
    assert wait_run(w.client, run_id)["status"] == "completed"
    assert len(w.bank.payments) == paid + 1


async def _discard(shared: Any, channel: str, handler: Any) -> None:
    shared.discard(channel, handler)


def test_a_queued_continuation_held_until_a_commit_wakes_the_workers_at_that_commit(
        w: World) -> None:
    # A transaction that finds the run's advance queued already holds it until it commits
    # (so no worker takes it before what the transaction changed): a worker's fetch in the
    # meantime skips it, so the commit notifies the workers again.
    from hookgate.runs.executors.procrastinate_private import hold_queued

    run_id, _ = w.parked_run()
    taken = w.srv.runtime.runs.executor.taken  # type: ignore[union-attr]
    db = w.srv.runtime.db
    (busy,), = w.sql("INSERT INTO procrastinate_jobs (queue_name, task_name, lock, args, "
                     "status, worker_id) VALUES ('hookgate_runs', 'hookgate.advance_run', "
                     "%s, '{}', 'doing', %s) RETURNING id", run_id, taken.worker_id)
    (queued,), = w.sql("INSERT INTO procrastinate_jobs (queue_name, task_name, lock, "
                       "queueing_lock, args) VALUES ('hookgate_runs', 'hookgate.advance_run', "
                       "%s, %s, '{}') RETURNING id", run_id, run_id)

    async def hold() -> bool:
        async with db.transaction() as tx:
            return await hold_queued(tx, run_id)

    try:
        with psycopg.connect(w.dsn, autocommit=True) as listener:
            listener.execute("LISTEN procrastinate_any_queue_v1")
            assert w.srv.call(hold())
            heard = [n.payload for n in listener.notifies(timeout=10, stop_after=1)]
        assert heard == [f'{{"type" : "job_inserted", "job_id" : {queued}}}']
    finally:
        w.sql("DELETE FROM procrastinate_jobs WHERE id IN (%s, %s)", busy, queued)


@pytest.mark.parametrize("kind", ["session", "driver"])
def test_a_continuation_that_cannot_be_taken_inserts_nothing_and_keeps_the_decision(
        w: World, kind: str) -> None:
    """The taken insert is one statement without a savepoint or a read of the run before it:
    a run that no longer waits, a pruned worker or a job of the run already doing makes it
    insert nothing, and the decision's transaction goes on (it then queues the advance, or
    not) — an ORM session's (a quorum's vote) or the driver's (a decision: record 0032)."""
    from hookgate.runs.executors.procrastinate_private import take_in_transaction
    from hookgate.storage.transaction import statements

    db = w.srv.runtime.db
    opened = db.transaction if kind == "session" else db.backend.change_transaction

    executor = w.srv.runtime.runs.executor
    taken = executor.taken  # type: ignore[union-attr]
    run_id, _ = w.parked_run()
    (busy,), = w.sql("INSERT INTO procrastinate_jobs (queue_name, task_name, lock, args, "
                     "status, worker_id) VALUES ('hookgate_runs', 'hookgate.advance_run', "
                     "%s, '{}', 'doing', %s) RETURNING id", run_id, taken.worker_id)
    gone = w.sql("SELECT coalesce(max(id), 0) + 1000 FROM procrastinate_workers")[0][0]

    async def attempt(worker_id: int, waiting: tuple[str, ...] = ("running", "awaiting_approval")
                      ) -> tuple[int | None, int]:
        job = executor.advance_task.configure(  # type: ignore[union-attr]
            lock=run_id, queueing_lock=run_id).make_new_job(run_id=run_id)
        async with opened() as tx:
            got = await take_in_transaction(tx, job, worker_id, run_id, waiting)
            # The transaction is still usable: the decision commits with it.
            still = (await (await statements(tx)).fetchrow("SELECT 1"))[0]
        return got, still

    try:
        assert w.srv.call(attempt(taken.worker_id)) == (None, 1)  # a job of the run doing
        w.sql("DELETE FROM procrastinate_jobs WHERE id = %s", busy)
        assert w.srv.call(attempt(gone)) == (None, 1)  # its worker's row is gone
        assert w.srv.call(attempt(taken.worker_id, ("running",))) == (None, 1)  # not waiting
        assert w.sql("SELECT count(*) FROM procrastinate_jobs WHERE lock = %s",
                     run_id) == [(0,)]
        got, _ = w.srv.call(attempt(taken.worker_id))  # and taken when it can be
        assert got is not None
        assert w.sql("SELECT status, worker_id FROM procrastinate_jobs WHERE id = %s",
                     got) == [("doing", taken.worker_id)]
    finally:
        w.sql("DELETE FROM procrastinate_jobs WHERE lock = %s", run_id)
