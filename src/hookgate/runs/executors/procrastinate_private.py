"""Everything hookgate does with procrastinate beyond its public API, in one module: what
its private schema is (table, columns, a foreign key, versioned functions) and its query
texts, relied on here and nowhere else.

Why the public API does not suffice, operation by operation:

- **A worker's fetch and finish of each job** (``DriverConnector``): procrastinate's connector
  runs them through psycopg's async path, about half a millisecond of the server's CPU each
  (13 % of it per run at concurrency 8, py-spy). Here they run on the PostgreSQL backend's
  driver (asyncpg: compiled protocol, statements prepared per connection, autocommit), as
  procrastinate's own query texts with their ``%(name)s`` parameters numbered for asyncpg,
  calling the same versioned functions of its schema. Every other query of the worker
  (heartbeats, stalled jobs, LISTEN) stays on procrastinate's psycopg connector; errors
  keep procrastinate's types.
- **A job queued inside a caller's transaction** (``QUEUE_IN_TRANSACTION``): the public
  defer takes a psycopg connection, and a job already queued under its queueing lock makes
  it raise, which fails the caller's transaction unless a savepoint (two round trips) is
  around it. A decision's transaction is the backend's driver's (asyncpg: decision record
  0032), so the job is inserted as procrastinate's defer function inserts it (the same
  columns, its triggers notify and log it), ``ON CONFLICT DO NOTHING``: a job already
  queued inserts nothing and the transaction goes on, on either connection.
- **A new run's row and its first job in ONE statement** (``SUBMIT``): the public defer is
  a statement of its own, so a run could be stored without its job or the reverse; here the
  job is deferred by procrastinate's own defer function inside the statement that stores the
  run.
- **A job taken as it is queued** (``SUBMIT_TAKEN``, local_dispatch.py): the public API has no
  "insert a job already doing under this worker"; the job row is inserted ``doing`` under
  the worker this process registered, relying on the jobs' foreign key to the worker
  (``WORKER_FOREIGN_KEY``, SQLSTATE 23503 when the worker was pruned).
- **A decision's continuation taken in the decision's own transaction**
  (``take_in_transaction``): queued, the continuation is a ``todo`` job whose NOTIFY wakes
  the workers, one of which fetches it (``procrastinate_fetch_job``, the costliest
  statement of a decision); taken, it is inserted ``doing`` under this process's worker in
  the transaction that stores the decision, and runs here once that commits. A job of the
  run already ``doing`` (procrastinate's unique index on a doing job's lock) or a pruned
  worker refuses the insert, and the caller queues the job instead.
- **A job's finish wakes the job its lock held back** (``DriverConnector``): a job queued
  while another job with its lock runs (a decision taken while its run was still parking)
  is fetched by no worker when its NOTIFY arrives, and procrastinate fetches it only at the
  next poll (seconds later). The statement that finishes a job also sends procrastinate's
  own ``job_inserted`` notification for a job waiting on its lock, in the same commit, or
  for one its snapshot cannot see yet (``FINISH_WAKING``). procrastinate's worker clears
  its wake-up after each fetch, so a fetch that found nothing while a notification came in
  is made again (``DriverConnector._fetch``).
- **A taken job ended by its run's end** (``TakenJobEnd``): the job this process took for a
  run is deleted (what procrastinate's finish does with a succeeded job) in the statement
  that stores the run's end, instead of by a finish of its own after it: one commit fewer
  per run. The job's outcome is the run's end: whatever runs after it (settling the run's
  requests, end notices) cannot change a finished run, which a retried job would only find
  finished.
- **Orphaned runs and a queued job held until a commit** (``ORPHANS``, ``HOLD_QUEUED``):
  reads of ``procrastinate_jobs`` by lock and queueing lock that the job manager does not
  offer inside a caller's transaction.
- **Installing its schema once** (``install_schema``): whether it is there is read from
  its jobs table, so that several instances starting at once install it once.

``check_schema`` says whether a database's procrastinate schema (and the installed
version, ``SUPPORTED_VERSIONS``) is one this module was written for; the suite runs it
against a real database, so an upgrade that changes any of it fails loudly there.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import procrastinate
from procrastinate import PsycopgConnector, sql
from procrastinate import exceptions as pq_exceptions
from procrastinate.jobs import Job
from procrastinate.schema import SchemaManager
from procrastinate.types import JobToDefer
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from hookgate.retries import first_then_retrying, pauses, retrying, warn_before_retry
from hookgate.storage.backends.base import AlongWrite
from hookgate.storage.backends.postgresql import PostgresBackend
from hookgate.storage.database import Database
from hookgate.storage.transaction import statements

if TYPE_CHECKING:
    from hookgate.runs.notifications import Notifications
    from hookgate.storage.transaction import Transaction

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
#: The job's columns, in the query's order: the driver hands rows over as asyncpg records or,
#: on a connection it borrowed from the pool, as psycopg tuples.
_FETCH_COLUMNS = tuple(c.strip() for c in re.search(
    r"SELECT\s+(.*?)\s+FROM", _FETCH_JOB, re.S | re.I).group(1).split(","))  # type: ignore[union-attr]
_FINISH_PG, _FINISH_NAMES = numbered(_FINISH_JOB)
#: procrastinate's notification of a job inserted, as its trigger sends it (channels and
#: payload, read from its schema so an upgrade that changes them is refused at import).
_NOTIFY = re.search(r"json_build_object\('type', 'job_inserted', 'job_id', NEW\.id\)::text"
                    r".*?pg_notify\('(procrastinate_queue_v\d+#)' \|\| NEW\.queue_name"
                    r".*?pg_notify\('(procrastinate_any_queue_v\d+)'",
                    SchemaManager.get_schema(), re.S)
if _NOTIFY is None or _FINISH_NAMES[:1] != ("job_id",):  # pragma: no cover
    raise ImportError("procrastinate's job notification or finish query is not the one "
                      "hookgate knows")
#: The channels of that notification: the queue's (its name appended) and any queue's.
_QUEUE_CHANNEL, _ANY_QUEUE_CHANNEL = _NOTIFY.group(1), _NOTIFY.group(2)


def _woken(waiting_if: str = "", source: str = "waiting") -> str:
    """The CTE ``woken``: procrastinate's own ``job_inserted`` notification (as its trigger
    sends it) for the job in ``source`` (``id``, ``queue_name``), if any (and if
    ``waiting_if`` holds); a NULL id wakes the workers of the queue for no job in particular
    (procrastinate's worker reads only the type)."""
    where = f" WHERE {waiting_if}" if waiting_if else ""
    return (f"woken AS (SELECT pg_notify('{_QUEUE_CHANNEL}' || queue_name, payload), "
            f"pg_notify('{_ANY_QUEUE_CHANNEL}', payload) FROM (SELECT queue_name, "
            "json_build_object('type', 'job_inserted', 'job_id', id)::text AS payload "
            f"FROM {source} AS s{where}) AS w)")


#: The finish, and in the same statement (the same commit) procrastinate's notification for
#: the job queued under the finished job's lock, if one waits: its advance jobs' queueing
#: lock is their lock (the index procrastinate keeps on a queued job's queueing lock). The
#: statement's snapshot still holds the finished job's row.
#:
#: A decision can commit after this statement's snapshot and before its commit, having
#: queued its run's continuation behind this job's lock (a decision landing as its run
#: parks): ``waiting`` misses that job, and the worker its NOTIFY woke skipped it. Every
#: transaction that queues a run's advance while another job of the run may run changes one
#: of the run's requests (a decision, an expiry, a cancellation: ``after_transition``; the
#: job's own queueing commits before its finish, and recovery queues only runs it found
#: without a job), so the run's pending requests are share-locked here, never waiting
#: (``still``): one changed since the snapshot (committed: no longer pending; in flight:
#: locked, skipped) is missing from ``still``, and the workers are woken anyway
#: (``changed``): a continuation committed by then is fetched after this commit, one still
#: in flight commits after it and its own NOTIFY finds the lock free. A change that comes
#: after the lock waits for this commit.
_PENDING_OF_D = ("SELECT cr.id FROM d JOIN confirmation_requests cr ON (cr.run_id = d.lock "
                 "OR cr.root_run_id = d.lock) WHERE cr.status = 'pending'")
FINISH_WAKING = (
    "WITH d AS (SELECT lock, queue_name FROM procrastinate_jobs WHERE id = $1), "
    "waiting AS (SELECT t.id, t.queue_name FROM d "
    "JOIN procrastinate_jobs t ON t.queueing_lock = d.lock AND t.lock = d.lock "
    "AND t.status = 'todo' LIMIT 1), "
    f"pending AS ({_PENDING_OF_D}), still AS ({_PENDING_OF_D} FOR SHARE OF cr SKIP LOCKED), "
    "changed AS (SELECT NULL::bigint AS id, d.queue_name FROM d "
    "WHERE NOT EXISTS (SELECT 1 FROM waiting) "
    "AND (SELECT count(*) FROM pending) > (SELECT count(*) FROM still)), "
    f"{_woken(source='(SELECT id, queue_name FROM waiting UNION ALL SELECT * FROM changed)')} "
    f"{_FINISH_PG.strip().rstrip(';')}, (SELECT count(*) FROM woken)")


#: A taken job ended with its run (``TakenJobEnd``): deleted, as procrastinate's finish of a
#: succeeded job deletes it (``status IN ('todo', 'doing')``, the same triggers), in the
#: statement that stores the run's end, only if that stored it (``up``, the fenced row);
#: and the job its lock held back woken, as ``FINISH_WAKING`` does (a run that ended has no
#: decision to wait for). $P1 the job, $P2 the run (the lock and queueing lock of its
#: advance jobs).
_END_CTES = (
    "waiting AS (SELECT t.id, t.queue_name FROM procrastinate_jobs t "
    "WHERE t.queueing_lock = $P2::text AND t.lock = $P2::text AND t.status = 'todo' "
    "LIMIT 1), "
    "ended AS (DELETE FROM procrastinate_jobs WHERE id = $P1::bigint AND status = 'doing' "
    "AND EXISTS (SELECT 1 FROM up) RETURNING id), "
    + _woken("EXISTS (SELECT 1 FROM ended)"))
#: 10 per job ended, plus the jobs woken (evaluated, so the notification is sent).
_END_RESULT = "(SELECT count(*) FROM ended) * 10 + (SELECT count(*) FROM woken)"


class TakenJobEnd:
    """The job this process took for a run, ended by the statement that stores the run's
    end (one commit fewer than finishing it after): ``done`` once that deleted it."""

    __slots__ = ("done", "job_id", "run_id")

    def __init__(self, job_id: int, run_id: str) -> None:
        self.job_id = job_id
        self.run_id = run_id
        self.done = False

    def along(self) -> AlongWrite:
        return AlongWrite(_END_CTES, _END_RESULT, (self.job_id, self.run_id), self._seen)

    def _seen(self, value: Any) -> None:
        self.done = int(value or 0) >= 10


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


#: procrastinate's foreign key from a job to the worker that holds it (its schema's name).
WORKER_FOREIGN_KEY = "procrastinate_jobs_worker_id_fkey"


def worker_gone(exc: BaseException) -> bool:
    """Whether ``exc`` is a job insert refused because its worker's row is gone (asyncpg's
    error, or psycopg's on a connection the driver borrowed)."""
    if getattr(exc, "sqlstate", None) != "23503":  # foreign_key_violation
        return False
    diag = getattr(exc, "diag", None)
    name = getattr(diag, "constraint_name", None) or getattr(exc, "constraint_name", None)
    return name == WORKER_FOREIGN_KEY


#: After a new run's row (the CTE ``up``, storage's PostgresBackend.insert_run_with): its
#: first job, deferred by procrastinate's function ($14.. defer_values). A new run has no
#: job queued, so none can conflict; the job's NOTIFY and bookkeeping are its triggers'.
SUBMIT = f"SELECT {defer_call(14)} FROM up"
#: The same, the job inserted already taken by this process's worker ($21; local_dispatch.py):
#: the job's id comes back.
SUBMIT_TAKEN = f"{taken_insert(14)} FROM up RETURNING id"
#: Runs that should advance and have no job queued or running (QueueExecutor.recover).
ORPHANS = """
SELECT runs.id FROM runs
 WHERE runs.status IN ('running', 'awaiting_approval')
   AND NOT EXISTS (SELECT 1 FROM procrastinate_jobs j
                    WHERE j.lock = runs.id AND j.status IN ('todo', 'doing'))
   AND (runs.status = 'running'
        OR NOT EXISTS (SELECT 1 FROM confirmation_requests cr
                        WHERE cr.run_id = runs.id AND cr.status = 'pending')
           AND NOT EXISTS (SELECT 1 FROM confirmation_requests cr
                            WHERE cr.root_run_id = runs.id AND cr.status = 'pending'))
"""
#: The job queued under a queueing lock, locked until the caller's transaction ends (a
#: worker skips locked jobs); and, at that commit, procrastinate's notification for it if
#: it is due: a worker whose fetch skipped it meanwhile would otherwise leave it to the poll.
HOLD_QUEUED = (
    "WITH held AS (SELECT id, queue_name, scheduled_at FROM procrastinate_jobs "
    "WHERE queueing_lock = $1 AND status = 'todo' FOR UPDATE), "
    f"{_woken('scheduled_at IS NULL OR scheduled_at <= now()', source='held')} "
    "SELECT id, (SELECT count(*) FROM woken) FROM held")


async def _in_transaction(session: Transaction, query: str, *args: Any) -> list[Any]:
    """``query``'s rows (``$n`` parameters) on ``session``'s own connection, in its
    transaction."""
    return list(await (await statements(session)).fetch(query, *args))


#: The fields of a job to defer as parameters ``$1``.. (defer_values' order), each cast.
_JOB_VALUES = ", ".join(f"${i}::{_JOB_CASTS[f]}" for i, f in enumerate(JobToDefer._fields, 1))
_AFTER_JOB = len(JobToDefer._fields) + 1
#: A job inserted ``doing`` under worker $8, in a caller's transaction, while run $9 has
#: one of the statuses $10 (after defer_values' seven): its id comes back, or no row when
#: the run no longer waits, the worker's row is gone (it is locked against its pruning
#: until the transaction ends, so the foreign key cannot refuse the insert) or a job with
#: its lock is ``doing`` (the unique index ``DOING_LOCK_INDEX``, the only unique index a
#: ``doing`` job can meet besides its new id). One statement, no savepoint and no separate
#: read of the run: docs/decisions/0019.
TAKE_IN_TRANSACTION = (
    f"INSERT INTO procrastinate_jobs ({', '.join((*JobToDefer._fields, *_TAKEN_COLUMNS))}) "
    f"SELECT {_JOB_VALUES}, 'doing', w.id FROM procrastinate_workers w "
    f"WHERE w.id = ${_AFTER_JOB}::bigint AND EXISTS (SELECT 1 FROM runs "
    f"WHERE runs.id = ${_AFTER_JOB + 1}::text AND runs.status = ANY(${_AFTER_JOB + 2}::text[])) "
    "FOR KEY SHARE OF w ON CONFLICT DO NOTHING RETURNING id")
#: A job queued (``todo``) in a caller's transaction, as procrastinate's defer function
#: inserts it (its triggers notify the workers and log it), unless one is queued under its
#: queueing lock already (``QUEUEING_LOCK_INDEX``, the only unique index a ``todo`` job can
#: meet besides its new id): then no row comes back and nothing was inserted, and the
#: caller's transaction goes on (no savepoint: decision record 0032).
QUEUE_IN_TRANSACTION = (
    f"INSERT INTO procrastinate_jobs ({', '.join(JobToDefer._fields)}) "
    f"SELECT {_JOB_VALUES} ON CONFLICT DO NOTHING RETURNING id")
#: procrastinate's unique index on the queueing lock of a job ``todo``.
QUEUEING_LOCK_INDEX = "procrastinate_jobs_queueing_lock_idx_v1"
#: procrastinate's unique index on the lock of a job ``doing`` (one job of a run at once).
DOING_LOCK_INDEX = "procrastinate_jobs_lock_idx_v1"


async def take_in_transaction(session: Transaction, job: Job, worker_id: int, run_id: str,
                              waiting: tuple[str, ...]) -> int | None:
    """Insert ``job`` already taken by worker ``worker_id`` in ``session``'s transaction, if
    run ``run_id``'s status is one of ``waiting``; its id, or None when the run does not
    wait, a job with its lock is doing or the worker was pruned (nothing was inserted)."""
    rows = await _in_transaction(session, TAKE_IN_TRANSACTION, *defer_values(job), worker_id,
                                 run_id, list(waiting))
    return int(rows[0][0]) if rows else None


async def queue_in_transaction(session: Transaction, job: Job) -> int | None:
    """Queue ``job`` in ``session``'s transaction; its id, or None when a job is queued
    under its queueing lock already (nothing was inserted)."""
    rows = await _in_transaction(session, QUEUE_IN_TRANSACTION, *defer_values(job))
    return int(rows[0][0]) if rows else None


async def hold_queued(session: Transaction, queueing_lock: str) -> bool:
    """Lock the job queued under ``queueing_lock`` until ``session``'s transaction ends;
    False when there is none (a worker took it)."""
    return bool(await _in_transaction(session, HOLD_QUEUED, queueing_lock))


async def orphaned_runs(session: Transaction) -> list[str]:
    """The runs that should advance and have no job queued or running (``ORPHANS``)."""
    return [str(row[0]) for row in await _in_transaction(session, ORPHANS)]


class DriverConnector(PsycopgConnector):
    """A PsycopgConnector whose fetch-a-job and finish-a-job statements take ``db``'s
    driver, and whose worker hears the queue's notifications on the process's one LISTEN
    connection (``wakeups``) when it has one: every backend listening on the database
    spends a transaction on each notification, whatever its channels."""

    def __init__(self, db: Database, *, wakeups: Notifications | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(db.backend, PostgresBackend):
            raise ValueError("the run queue needs a PostgreSQL database")
        self._driver = db.backend.driver
        self._wakeups = wakeups
        #: Queue notifications heard so far (see `_fetch`).
        self._heard = 0

    async def listen_notify(self, on_notification: Any, channels: Iterable[str]) -> None:
        if self._wakeups is None:
            async def counted(*, channel: str, payload: str) -> None:
                self._heard += 1
                await on_notification(channel=channel, payload=payload)

            await super().listen_notify(on_notification=counted, channels=channels)
            return
        loop = asyncio.get_running_loop()
        pending: set[asyncio.Task[None]] = set()
        handlers: list[tuple[str, Callable[[str | None], None]]] = []

        def heard_done(task: asyncio.Task[None]) -> None:
            pending.discard(task)
            if not task.cancelled() and task.exception() is not None:
                log.warning("the worker could not handle a queue notification: %r",
                            task.exception())

        def handler_of(channel: str) -> Callable[[str | None], None]:
            def heard(payload: str | None) -> None:
                if payload is None:  # the LISTEN connection came back: the worker polls
                    return
                self._heard += 1
                task = loop.create_task(on_notification(channel=channel, payload=payload))
                pending.add(task)
                task.add_done_callback(heard_done)
            return heard

        try:
            for channel in channels:
                handler = handler_of(channel)
                handlers.append((channel, handler))
                await self._wakeups.add(channel, handler)
            await asyncio.Event().wait()  # until the worker stops (cancelled)
        finally:
            for channel, handler in handlers:
                self._wakeups.discard(channel, handler)

    async def execute_query_one_async(self, query: Any, **arguments: Any) -> dict[str, Any]:
        if query != _FETCH_JOB:
            found: dict[str, Any] = await super().execute_query_one_async(query, **arguments)
            return found
        row = await self._fetch(arguments)
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

    async def _fetch(self, arguments: dict[str, Any]) -> Any:
        """The fetch's row (its id NULL, or no row: no job found). procrastinate's worker
        forgets a wake-up heard while its fetch runs (it clears its event after the fetch):
        a job whose NOTIFY arrives then (committed, or its lock freed, after the fetch's
        snapshot) would wait for the next poll. So a fetch that found nothing while a
        notification was heard is made again (as many times as that happens: no poll)."""
        while True:
            heard = self._heard
            row = await self._on_driver("fetchrow", _FETCH_PG, _FETCH_NAMES, arguments)
            if (row is not None and row[0] is not None) or heard == self._heard:
                return row

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
                await self._on_driver("execute", FINISH_WAKING, _FINISH_NAMES, arguments)
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

    async def _on_driver(self, method: str, query: str, names: tuple[str, ...],
                       arguments: dict[str, Any]) -> Any:
        import asyncpg  # type: ignore[import-untyped]
        import psycopg

        try:
            return await getattr(self._driver, method)(query, *(arguments[n] for n in names))
        except (asyncpg.PostgresError, asyncpg.InterfaceError, psycopg.Error, OSError) as exc:
            # asyncpg's on the driver's own connections, psycopg's on one it borrowed.
            raise pq_exceptions.ConnectorException(str(exc)) from exc


#: The procrastinate versions this module was written for: [first, before), as (major, minor).
SUPPORTED_VERSIONS = ((3, 10), (4, 0))
#: The columns of ``procrastinate_jobs`` written or read here.
JOB_COLUMNS = ("id", *JobToDefer._fields, *_TAKEN_COLUMNS)
#: procrastinate's functions and types the statements here call (from its query texts).
_FUNCTIONS = tuple(sorted({name for key in ("fetch_job", "finish_job", "defer_jobs")
                           for name in re.findall(r"procrastinate_\w+_v\d+", sql.queries[key])}))
_SCHEMA_FACTS = """
SELECT (SELECT coalesce(array_agg(column_name::text), '{}') FROM information_schema.columns
         WHERE table_name = 'procrastinate_jobs' AND column_name = ANY($1::text[])),
       (SELECT count(*) FROM pg_constraint WHERE conname = $2
         AND conrelid = to_regclass('procrastinate_jobs') AND contype = 'f'
         AND confrelid = to_regclass('procrastinate_workers')),
       (SELECT coalesce(array_agg(name), '{}') FROM (
          SELECT proname::text AS name FROM pg_proc WHERE proname = ANY($3::text[])
          UNION SELECT typname::text FROM pg_type WHERE typname = ANY($3::text[])) AS found)
"""


async def install_schema(db: Database) -> None:
    """Create procrastinate's tables if they are missing (call under the start-up lock:
    several processes may start at once)."""
    async with db.transaction() as s:
        raw = await (await s.connection()).get_raw_connection()
        conn = raw.driver_connection
        assert conn is not None
        found = await (await conn.execute(
            "SELECT to_regclass('procrastinate_jobs') IS NOT NULL")).fetchone()
        if not found[0]:  # no parameters: psycopg runs the script as it is
            await conn.execute(SchemaManager.get_schema())


class UnsupportedProcrastinate(RuntimeError):
    """The installed procrastinate, or its schema in the database, is not the one the run
    queue's statements were written for."""


def check_version(version: str | None = None) -> None:
    """Raise UnsupportedProcrastinate unless ``version`` (the installed one) is supported."""
    text = version or procrastinate.__version__
    numbers = [int(n) for n in re.findall(r"\d+", text)[:2]]
    found = [*numbers, 0, 0][:2]
    first, before = SUPPORTED_VERSIONS
    if not first <= tuple(found) < before:
        raise UnsupportedProcrastinate(
            f"procrastinate {text} is installed; hookgate's run queue relies on its private "
            f"schema and query texts as of {'.'.join(map(str, first))} up to (not "
            f"including) {'.'.join(map(str, before))} "
            "(runs/executors/procrastinate_private.py): install a supported version, or "
            "update that module and its check")


async def check_schema(db: Database) -> None:
    """Raise UnsupportedProcrastinate, saying what is missing, unless the installed version
    and ``db``'s procrastinate schema have everything this module relies on."""
    check_version()
    if not isinstance(db.backend, PostgresBackend):
        raise UnsupportedProcrastinate("the run queue needs a PostgreSQL database")
    row = await db.backend.driver.fetchrow(_SCHEMA_FACTS, list(JOB_COLUMNS), WORKER_FOREIGN_KEY,
                                         list(_FUNCTIONS))
    missing = [f"column procrastinate_jobs.{c}" for c in JOB_COLUMNS if c not in row[0]]
    if not row[1]:
        missing.append(f"foreign key {WORKER_FOREIGN_KEY} (jobs -> workers)")
    missing += [f"function or type {name}" for name in _FUNCTIONS if name not in row[2]]
    if missing:
        raise UnsupportedProcrastinate(
            f"procrastinate {procrastinate.__version__}'s schema in {db.safe_url} lacks "
            f"what hookgate's run queue relies on: {', '.join(missing)} "
            "(runs/executors/procrastinate_private.py)")
