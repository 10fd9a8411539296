"""The worker's per-job statements on hookgate's driver (executors/procrastinate_private.py): runs
advance whether the driver answers on its own asyncpg connections or on psycopg ones it
borrowed from the pool (which hand rows over as tuples, not records), and procrastinate's
query texts are numbered for asyncpg without changing what they say."""

from __future__ import annotations

import concurrent.futures
import time

import httpx
import pytest

from hookgate.runs.executors.procrastinate_private import numbered
from hookgate.runs.executors.settings import WorkerSettings
from hookgate.storage.backends import pg_driver
from tests.live_server import live_server
from tests.server.demo_world import auth, world
from tests.server.test_api import wait_run


def test_parameters_are_numbered_in_order_and_a_repeated_name_keeps_its_number() -> None:
    text, names = numbered("SELECT f(%(a)s::int[], %(b)s, %(a)s) WHERE x = '%%(c)s'")
    assert names == ("a", "b")
    assert text == "SELECT f($1::int[], $2, $1) WHERE x = '%(c)s'"


@pytest.mark.parametrize("own", [pg_driver.OWN_CONNECTIONS, 0], ids=["asyncpg", "borrowed"])
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_runs_advance_on_the_drivers_own_and_on_borrowed_connections(
        database_url: str, own: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_driver, "OWN_CONNECTIONS", own)
    deployment, _ = world(database_url, turns=[{"answer": "nothing to pay"}])
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        def start(_: int) -> str:
            r = c.post("/api/runs", json={"agent_id": "buyer", "message": "hi"},
                       headers=auth("alice"))
            assert r.status_code == 200, r.text
            return str(r.json()["run_id"])

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            run_ids = list(pool.map(start, range(16)))
        assert [wait_run(c, run_id)["status"] for run_id in run_ids] == ["completed"] * 16
        worker = srv.runtime.runs.executor._worker  # type: ignore[union-attr]
        assert worker is not None and not worker.done()


async def _sql(url: str, statement: str) -> None:
    from sqlalchemy import text

    from hookgate.storage.database import Database

    db = Database(url)
    try:
        async with db.engine.begin() as conn:
            await conn.execute(text(statement))
    finally:
        await db.dispose()


@pytest.mark.parametrize("own", [pg_driver.OWN_CONNECTIONS, 0], ids=["asyncpg", "borrowed"])
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_worker_whose_fetch_the_database_refuses_starts_again_once_it_answers(
        database_url: str, own: int, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    # The database itself refuses the fetch (its function is away), on either driver the
    # driver may use: the error reaches procrastinate as its own ConnectorException, the
    # worker ends, is started again until the database answers, and the run completes.
    import logging

    from hookgate.runs.executors import queue

    monkeypatch.setattr(pg_driver, "OWN_CONNECTIONS", own)
    monkeypatch.setattr(queue, "WORKER_RESTART_S", (0.2, 0.5))
    deployment, _ = world(database_url, turns=[{"answer": "nothing to pay"}])
    # Through the queue: a run its own instance takes needs no fetch.
    deployment.worker = WorkerSettings(take_own_runs=False)
    with caplog.at_level(logging.ERROR, logger=queue.__name__), live_server(deployment) as srv, \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        srv.call(_sql(database_url, "ALTER FUNCTION procrastinate_fetch_job_v2(varchar[], "
                                    "bigint) RENAME TO procrastinate_fetch_job_v2_away"))
        r = c.post("/api/runs", json={"agent_id": "buyer", "message": "hi"},
                   headers=auth("alice"))
        assert r.status_code == 200, r.text
        run_id = r.json()["run_id"]

        def refused() -> bool:
            return any("run worker stopped on an error" in rec.message
                       and "ConnectorException" in (rec.exc_text or "")
                       for rec in caplog.records)

        deadline = time.monotonic() + 10
        while not refused():
            assert time.monotonic() < deadline, "the worker never hit the refused fetch"
            time.sleep(0.05)
        assert c.get(f"/api/runs/{run_id}", headers=auth("alice")).json()["status"] \
            == "running"
        srv.call(_sql(database_url, "ALTER FUNCTION procrastinate_fetch_job_v2_away("
                                    "varchar[], bigint) RENAME TO procrastinate_fetch_job_v2"))
        assert wait_run(c, run_id)["status"] == "completed"


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_finish_the_database_refuses_for_a_moment_is_tried_again(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The job ran (the payment is made) but the database refuses to finish it for a
    # moment. A job left "doing" under a live worker is never retried, and its lock (the
    # run's id) would keep the run's next job from ever being fetched: the finish is tried
    # again, the job ends, the payment stays single and the next run goes through.
    from hookgate.runs.executors import procrastinate_private
    from tests.runs.test_submit_atomic import _sql as query

    monkeypatch.setattr(procrastinate_private, "FINISH_RETRY_S", (0.2, 0.5, 1.0, 2.0, 4.0))
    finish = "procrastinate_finish_job_v1(bigint, procrastinate_job_status, boolean)"
    deployment, bank = world(database_url, turns=[
        {"tool_calls": [{"name": "oa__purchase_pay", "args": {"amount": 100, "vendor": "X"}}]},
        {"answer": "paid"}])
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        srv.call(_sql(database_url, f"ALTER FUNCTION {finish} "
                                    "RENAME TO procrastinate_finish_job_v1_away"))
        r = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
                   headers=auth("alice"))
        run_id = r.json()["run_id"]
        deadline = time.monotonic() + 10
        while not bank.payments:
            assert time.monotonic() < deadline, "the job never ran"
            time.sleep(0.05)
        time.sleep(0.5)  # the first finishes are refused
        srv.call(_sql(database_url, "ALTER FUNCTION procrastinate_finish_job_v1_away("
                                    "bigint, procrastinate_job_status, boolean) "
                                    "RENAME TO procrastinate_finish_job_v1"))
        assert wait_run(c, run_id)["status"] == "completed"
        deadline = time.monotonic() + 10
        while srv.call(query(database_url, "SELECT id FROM procrastinate_jobs "
                                           f"WHERE lock = '{run_id}'")):
            assert time.monotonic() < deadline, "the job was left unfinished"
            time.sleep(0.1)
        again = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
                       headers=auth("alice")).json()["run_id"]
        assert wait_run(c, again)["status"] == "completed"
    assert bank.payments == [{"amount": 100, "vendor": "X"}] * 2  # one per run
