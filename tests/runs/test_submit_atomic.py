"""A new run and its first job are stored together or not at all (executors/queue.py
submit: one statement on PostgreSQL): a run stored without its job would wait for the next
recovery pass, and a client told its start failed could start it again beside it."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from hookgate.runs.executors.settings import WorkerSettings
from hookgate.storage.database import Database
from tests.live_server import live_server
from tests.server.demo_world import auth, world
from tests.server.test_api import wait_pending, wait_run

REFUSE_JOBS = (
    "CREATE FUNCTION refuse_jobs() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN RAISE EXCEPTION 'no jobs today'; END $$",
    "CREATE TRIGGER refuse_jobs BEFORE INSERT ON procrastinate_jobs "
    "FOR EACH ROW EXECUTE FUNCTION refuse_jobs()",
)


async def _sql(url: str, sql: str) -> list[Any]:
    db = Database(url)
    try:
        async with db.engine.begin() as conn:
            result = await conn.execute(text(sql))
            return list(result.all()) if result.returns_rows else []
    finally:
        await db.dispose()


@pytest.mark.parametrize("take_own_runs", [True, False], ids=["taken", "queued"])
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_run_whose_job_cannot_be_queued_is_not_stored(database_url: str,
                                                        take_own_runs: bool) -> None:
    # Both statements a new run can take: its job inserted already taken by this instance
    # (executors/local_dispatch.py), or queued with procrastinate's defer function.
    deployment, bank = world(database_url)
    deployment.worker = WorkerSettings(take_own_runs=take_own_runs)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        for sql in REFUSE_JOBS:
            srv.call(_sql(database_url, sql))
        r = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay ACME"},
                   headers=auth("alice"))
        assert r.status_code == 500
        assert srv.call(_sql(database_url, "SELECT id FROM runs")) == []
        assert srv.call(_sql(database_url, "SELECT id FROM procrastinate_jobs")) == []

        srv.call(_sql(database_url, "DROP TRIGGER refuse_jobs ON procrastinate_jobs"))
        r = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay ACME"},
                   headers=auth("alice"))
        assert r.status_code == 200, r.text
        run_id = r.json()["run_id"]
        assert wait_pending(c)["run_id"] == run_id  # its job ran: it reached the gate
        rows = srv.call(_sql(database_url, "SELECT id FROM runs"))
        assert [row[0] for row in rows] == [run_id]
        assert bank.payments == []


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_the_job_row_follows_procrastinates_own_type(database_url: str) -> None:
    # submit() builds procrastinate's row type field by field in JobToDefer's order: an
    # upgrade that reorders or renames the type's fields must fail here, not defer garbage.
    from procrastinate.types import JobToDefer

    from hookgate.runs.executors.procrastinate_private import DEFER_CALL

    assert DEFER_CALL is not None
    deployment, _ = world(database_url)
    with live_server(deployment) as srv:  # its start installs procrastinate's schema
        rows = srv.call(_sql(database_url, (
            "SELECT attname FROM pg_attribute WHERE attrelid = (SELECT typrelid FROM pg_type "
            f"WHERE typname = '{DEFER_CALL.group(2)}') AND attnum > 0 ORDER BY attnum")))
    assert tuple(row[0] for row in rows) == JobToDefer._fields


@pytest.mark.parametrize("own", [8, 0], ids=["asyncpg", "borrowed"])
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_runs_still_start_after_another_instance_pruned_this_ones_workers(
        database_url: str, own: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another instance deletes the worker rows whose heartbeats it found stale (this
    # process or the database paused for longer than stalled_after_s). A job inserted
    # under the pruned worker's id breaks procrastinate's foreign key: that run goes
    # through the queue instead (nothing half-stored), a new worker is registered, and the
    # runs after it are taken again. On either kind of driver connection (their drivers
    # report the refusal differently).
    from hookgate.storage.backends import pg_driver

    monkeypatch.setattr(pg_driver, "OWN_CONNECTIONS", own)
    deployment, _ = world(database_url, turns=[{"answer": "nothing to pay"}])
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        taken = srv.runtime.runs.executor.taken  # type: ignore[union-attr]
        pruned = taken.worker_id
        assert pruned is not None
        srv.call(_sql(database_url, "DELETE FROM procrastinate_workers"))
        for _ in range(3):
            r = c.post("/api/runs", json={"agent_id": "buyer", "message": "hi"},
                       headers=auth("alice"))
            assert r.status_code == 200, r.text
            assert wait_run(c, r.json()["run_id"])["status"] == "completed"
            deadline = time.monotonic() + 10
            while taken.worker_id is None:
                assert time.monotonic() < deadline, "no new worker was registered"
                time.sleep(0.05)
        assert taken.worker_id != pruned
        workers = [row[0] for row in srv.call(_sql(database_url,
                                                   "SELECT id FROM procrastinate_workers"))]
        assert taken.worker_id in workers and pruned not in workers
        runs = srv.call(_sql(database_url, "SELECT count(*) FROM runs"))
        assert runs == [(3,)]  # each start stored once, the refused insert left nothing
