"""procrastinate's statements on hookgate's PostgreSQL lane: its psycopg connector with the
two statements a worker makes per job on the lane, and its defer as SQL to put beside the
row of the run a new job advances.

Every run is a job: a worker fetches it (unless the instance that started the run took it
at once, executors/taken_jobs.py) and, once it has run, finishes it. Through
psycopg's async path (its pool, a cursor, Python-level waiting) each of those costs about
half a millisecond of the server's CPU, 13 % of it per run at concurrency 8 (py-spy); on
the lane's asyncpg connections (storage/pg_lane.py: compiled protocol, statements prepared
per connection, autocommit) a fraction of that. The statements are procrastinate's own —
its query texts, with their ``%(name)s`` parameters numbered for asyncpg — calling the same
versioned functions of its schema; every other query (deferring inside a caller's
transaction, heartbeats, stalled jobs, LISTEN) stays on psycopg. Errors keep procrastinate's
types, so the worker handles them as it would its own connector's.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from procrastinate import PsycopgConnector, sql
from procrastinate import exceptions as pq_exceptions
from procrastinate.jobs import Job
from procrastinate.types import JobToDefer
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from hookgate.retries import first_then_retrying, pauses, retrying, warn_before_retry
from hookgate.storage.database import Database
from hookgate.storage.pg_lane import PgLane

log = logging.getLogger(__name__)
#: Pauses between attempts to finish a job whose finish failed (then the error stands).
FINISH_RETRY_S = (0.1, 0.5, 1.0, 2.0, 5.0)
#: What procrastinate's finish function says of a job that is not "doing" any more.
_NOT_DOING = "not found or not in"
_PARAM = re.compile(r"%%|%\((\w+)\)s")


def numbered(query: str) -> tuple[str, tuple[str, ...]]:
    """``query`` with its ``%(name)s`` parameters as ``$1``, ``$2``… (a name used twice
    keeps its number) and ``%%`` as ``%``, and the names in that order."""
    names: list[str] = []

    def number(found: re.Match[str]) -> str:
        if found.group(1) is None:
            return "%"
        if found.group(1) not in names:
            names.append(found.group(1))
        return f"${names.index(found.group(1)) + 1}"

    return _PARAM.sub(number, query), tuple(names)


_FETCH_JOB = sql.queries["fetch_job"]
_FINISH_JOB = sql.queries["finish_job"]
_FETCH_PG, _FETCH_NAMES = numbered(_FETCH_JOB)
#: The job's columns, in the query's order: the lane hands rows over as asyncpg records or,
#: on a connection it borrowed from the pool, as psycopg tuples.
_FETCH_COLUMNS = tuple(c.strip() for c in re.search(
    r"SELECT\s+(.*?)\s+FROM", _FETCH_JOB, re.S | re.I).group(1).split(","))  # type: ignore[union-attr]
_FINISH_PG, _FINISH_NAMES = numbered(_FINISH_JOB)


#: The function and row type procrastinate's own defer query calls (versioned names, read
#: from its query text so an upgrade that renames them is followed, or refused at import).
DEFER_CALL = re.search(r"(procrastinate_defer_jobs_v\d+)\(\s*%\(jobs\)s::(\w+)\[\]",
                       sql.queries["defer_jobs"])
if DEFER_CALL is None:  # pragma: no cover - only a procrastinate this code does not know
    raise ImportError("procrastinate's defer_jobs query is not the one hookgate knows")
#: Each field of a job to defer, cast to its column's type (asyncpg cannot infer them in a
#: row constructor), in procrastinate's order (types.JobToDefer).
_JOB_CASTS = {"queue_name": "varchar", "task_name": "varchar", "priority": "integer",
              "lock": "text", "queueing_lock": "text", "args": "jsonb",
              "scheduled_at": "timestamptz"}


def defer_call(first: int) -> str:
    """SQL deferring one job with procrastinate's own function, its fields as parameters
    ``$first``.. (``defer_values``' order): to put inside a larger statement, e.g. with the
    row of the run the job advances."""
    assert DEFER_CALL is not None
    row = ", ".join(f"${first + i}::{_JOB_CASTS[f]}" for i, f in enumerate(JobToDefer._fields))
    return f"{DEFER_CALL.group(1)}(ARRAY[ROW({row})::{DEFER_CALL.group(2)}])"


#: The job columns a taken job is inserted with, beyond procrastinate's fields to defer.
_TAKEN_COLUMNS = ("status", "worker_id")


def taken_insert(first: int) -> str:
    """SQL inserting one job already taken: ``doing`` under the worker ``$(first + 7)``,
    its fields ``$first``.. in ``defer_values``' order. Nothing is notified (no worker is
    to fetch it) and procrastinate logs no ``deferred``/``started`` event for it; if its
    worker stops beating, procrastinate's stalled-job query finds it like any other."""
    fields = JobToDefer._fields
    row = ", ".join(f"${first + i}::{_JOB_CASTS[f]}" for i, f in enumerate(fields))
    return (f"INSERT INTO procrastinate_jobs ({', '.join((*fields, *_TAKEN_COLUMNS))}) "
            f"SELECT {row}, 'doing', ${first + len(fields)}::bigint")


def defer_values(job: Job) -> list[Any]:
    """``job``'s fields for ``defer_call``, as procrastinate's own defer builds them."""
    fields = JobToDefer(queue_name=job.queue, task_name=job.task_name, priority=job.priority,
                        lock=job.lock, queueing_lock=job.queueing_lock, args=job.task_kwargs,
                        scheduled_at=job.scheduled_at)._asdict()
    fields["args"] = json.dumps(fields["args"])  # jsonb: asyncpg takes its text
    return list(fields.values())


class LaneConnector(PsycopgConnector):
    """A PsycopgConnector whose fetch-a-job and finish-a-job statements take ``db``'s
    lane."""

    def __init__(self, db: Database, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        lane = PgLane.for_database(db)
        if lane is None:
            raise ValueError("the run queue needs a PostgreSQL database")
        self._lane = lane

    async def execute_query_one_async(self, query: Any, **arguments: Any) -> dict[str, Any]:
        if query != _FETCH_JOB:
            found: dict[str, Any] = await super().execute_query_one_async(query, **arguments)
            return found
        row = await self._on_lane("fetchrow", _FETCH_PG, _FETCH_NAMES, arguments)
        if row is None:
            raise pq_exceptions.NoResult
        values = tuple(row)
        if len(values) != len(_FETCH_COLUMNS):
            raise pq_exceptions.ConnectorException(
                f"fetch_job returned {len(values)} columns, expected {len(_FETCH_COLUMNS)}")
        job = dict(zip(_FETCH_COLUMNS, values, strict=True))
        if isinstance(job.get("args"), str):  # asyncpg hands jsonb over as its text
            job["args"] = json.loads(job["args"])
        return job

    async def execute_query_async(self, query: Any, **arguments: Any) -> None:
        if query != _FINISH_JOB:
            await super().execute_query_async(query, **arguments)
            return
        # A finish that fails leaves the job "doing" under a live worker, which nothing
        # retries, and its lock (the run's id) keeps the run's next job from ever being
        # fetched: the run would be stuck. So a failed finish is tried again for a while.
        # An attempt after one whose answer was lost finds the job finished already
        # (gone, or no longer "doing"): that is success.
        tried = 0

        async def finish() -> None:
            nonlocal tried
            tried += 1
            try:
                await self._on_lane("execute", _FINISH_PG, _FINISH_NAMES, arguments)
            except pq_exceptions.ConnectorException as exc:
                if tried == 1 or _NOT_DOING not in str(exc):
                    raise

        def attempts() -> AsyncRetrying:
            return retrying(
                wait=pauses(lambda: FINISH_RETRY_S),
                stop=stop_after_attempt(len(FINISH_RETRY_S) + 1),
                retry=retry_if_exception_type(pq_exceptions.ConnectorException),
                before_sleep=warn_before_retry(
                    log, lambda _: f"finishing job {arguments.get('job_id')}"))
        await first_then_retrying(attempts, finish)

    async def _on_lane(self, method: str, query: str, names: tuple[str, ...],
                       arguments: dict[str, Any]) -> Any:
        import asyncpg  # type: ignore[import-untyped]
        import psycopg

        try:
            return await getattr(self._lane, method)(query, *(arguments[n] for n in names))
        except (asyncpg.PostgresError, asyncpg.InterfaceError, psycopg.Error, OSError) as exc:
            # asyncpg's on the lane's own connections, psycopg's on one it borrowed.
            raise pq_exceptions.ConnectorException(str(exc)) from exc
