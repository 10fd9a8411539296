"""The run worker starts again after an error (executors/queue.py `_work`): one failed
statement in procrastinate's fetch loop ends its worker, and a server whose worker had
ended would go on accepting runs that nothing advances."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest
from procrastinate import exceptions as pq_exceptions

from hookgate.runs.executors import procrastinate_private, queue
from hookgate.runs.executors.procrastinate_private import DriverConnector
from hookgate.runs.executors.settings import WorkerSettings
from tests.live_server import live_server
from tests.server.demo_world import auth, world
from tests.server.test_api import wait_run


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_worker_that_fails_to_fetch_starts_again_and_the_run_completes(
        database_url: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(queue, "WORKER_RESTART_S", (0.2, 1.0))
    real = DriverConnector.execute_query_one_async
    failures: list[str] = []

    async def flaky(self: DriverConnector, query: Any, **arguments: Any) -> dict[str, Any]:
        if query == procrastinate_private._FETCH_JOB and len(failures) < 2:
            failures.append(query)
            raise pq_exceptions.ConnectorException("the database went away for a moment")
        return await real(self, query, **arguments)

    monkeypatch.setattr(DriverConnector, "execute_query_one_async", flaky)
    deployment, _ = world(database_url, turns=[{"answer": "nothing to pay"}])
    # Through the queue: a run its own instance takes needs no fetch.
    deployment.worker = WorkerSettings(take_own_runs=False)
    with caplog.at_level(logging.ERROR, logger=queue.__name__), live_server(deployment) as srv, \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        r = c.post("/api/runs", json={"agent_id": "buyer", "message": "hi"},
                   headers=auth("alice"))
        assert r.status_code == 200, r.text
        body = wait_run(c, r.json()["run_id"])
        assert body["status"] == "completed"
        assert body["answer"] == "nothing to pay"
    assert len(failures) == 2  # the worker died twice and was started again each time
    stopped = [rec for rec in caplog.records if "run worker stopped on an error" in rec.message]
    assert len(stopped) == 2
