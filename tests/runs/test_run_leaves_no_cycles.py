"""A finished run's objects (its driver, state, registry, hook contexts) are freed when the
run lets go of them, not left in reference cycles for the garbage collector: with the
server's young-generation threshold raised (server/app.py), cyclic garbage from every run
would pile up between collections and cost each run a share of a collection's time."""

from __future__ import annotations

import asyncio
import gc

import pytest

from hookgate.storage.runs import DatabaseRunStore
from tests.live_server import LiveServer, live_server
from tests.runs.test_commits_per_run import one_call_deployment

pytestmark = pytest.mark.perf  # garbage-collector behaviour: a performance internal

#: The classes of a run's own objects.
RUN_OBJECTS = {"RunDriver", "RunState", "HookRegistry", "HookContext", "MetadataView",
               "ApprovalGate", "AuditLog"}


async def runs_to_the_end(srv: LiveServer, n: int) -> None:
    """``n`` runs one after another, each until its checkpoint says it ended."""
    runtime = srv.runtime
    for _ in range(n):
        state = await runtime.runs.start("clerk", "note it", user_id="alice", org_id="acme")
        for _ in range(600):
            stored = await DatabaseRunStore(runtime.db).load(state.run_id)
            if stored is not None and stored.finished:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError(f"run {state.run_id} did not end")


@pytest.mark.parametrize("database_url", ["sqlite", "postgresql"], indirect=True)
def test_runs_leave_no_cyclic_garbage(database_url: str) -> None:
    dep, ran = one_call_deployment(database_url)
    with live_server(dep, sweep_interval=3600) as srv:
        srv.call(runs_to_the_end(srv, 2), timeout=60)  # warm up
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds stays in gc.garbage
        try:
            srv.call(runs_to_the_end(srv, 5), timeout=60)
            gc.collect()
            kinds = {type(o).__name__ for o in gc.garbage}
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    assert len(ran) == 7
    assert not kinds & RUN_OBJECTS, f"a run left cycles holding {sorted(kinds & RUN_OBJECTS)}"
