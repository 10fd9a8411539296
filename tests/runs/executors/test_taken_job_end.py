"""A job this process took for a run ends with the run: the statement that stores the run's
end deletes it (as procrastinate's finish of a succeeded job does) and wakes the job its
lock held back; a write refused by the run's fence deletes nothing, and the job is then
finished as before. On a real PostgreSQL with procrastinate's schema."""

from __future__ import annotations

import json

import psycopg
import pytest

from hookgate.engines.events import event_of
from hookgate.engines.interrupts import Fenced
from hookgate.engines.state import RunState
from hookgate.runs.executors.procrastinate_private import TakenJobEnd, install_schema
from hookgate.storage.database import Database
from hookgate.storage.fencing import take_over
from hookgate.storage.runs import DatabaseRunStore

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


def sql(db: Database, statement: str, *args: object) -> list[tuple[object, ...]]:
    with psycopg.connect(db.libpq_url, autocommit=True) as conn:
        cur = conn.execute(statement, args)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def job(db: Database, run_id: str, status: str) -> int:
    """An advance job of ``run_id`` (its lock and queueing lock are the run's)."""
    queueing = run_id if status == "todo" else None
    ((job_id,),) = sql(db, "INSERT INTO procrastinate_jobs (queue_name, task_name, lock, "
                           "queueing_lock, args, status) VALUES ('hookgate_runs', "
                           "'hookgate.advance_run', %s, %s, %s, %s) RETURNING id",
                       run_id, queueing, json.dumps({"run_id": run_id}), status)
    return int(job_id)  # type: ignore[call-overload]


async def ended_state(db: Database, run_id: str) -> tuple[DatabaseRunStore, RunState]:
    """The run's store (procrastinate's schema installed) and the run, stored running,
    about to end."""
    await install_schema(db)
    store = DatabaseRunStore(db, trace_in_log=True)
    state = RunState(run_id=run_id, agent_id="clerk", org_id="acme")
    await store.save(state)
    state.status = "completed"
    state.trace.append(event_of("done", {"status": "completed", "answer": None}, 1).to_dict())
    return store, state


async def test_the_runs_end_deletes_its_taken_job_and_wakes_the_one_held_back(
        db: Database) -> None:
    store, state = await ended_state(db, "run_j1")
    fence = await take_over(db, "run_j1")
    taken = job(db, "run_j1", "doing")
    held_back = job(db, "run_j1", "todo")  # a continuation queued behind the taken job
    end = TakenJobEnd(taken, "run_j1")
    with psycopg.connect(db.libpq_url, autocommit=True) as listener:
        listener.execute('LISTEN "procrastinate_any_queue_v1"')
        done = event_of("done", {"status": "completed", "answer": None}, 1)
        await store.save(state, fence=fence, events=[done], along=end.along())
        heard = [json.loads(n.payload) for n in listener.notifies(timeout=1.0, stop_after=1)]
    assert end.done
    assert sql(db, "SELECT id, status FROM procrastinate_jobs WHERE lock = 'run_j1'") == [
        (held_back, "todo")]
    assert heard == [{"type": "job_inserted", "job_id": held_back}]
    assert sql(db, "SELECT status FROM runs WHERE id = 'run_j1'") == [("completed",)]


async def test_an_end_refused_by_the_fence_leaves_the_job_to_be_finished(
        db: Database) -> None:
    store, state = await ended_state(db, "run_j2")
    stale = await take_over(db, "run_j2")
    assert await take_over(db, "run_j2") is not None  # another executor took the run
    taken = job(db, "run_j2", "doing")
    end = TakenJobEnd(taken, "run_j2")
    with pytest.raises(Fenced):
        await store.save(state, fence=stale, along=end.along())
    assert not end.done
    assert sql(db, "SELECT status FROM procrastinate_jobs WHERE id = %s", taken) == [
        ("doing",)]
    assert sql(db, "SELECT status FROM runs WHERE id = 'run_j2'") == [("running",)]
