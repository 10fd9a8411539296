"""The run queue executor (PostgreSQL): every advance of a run is a procrastinate job.

- A job advances one run until it ends or must wait for a person: then the run is
  checkpointed as ``awaiting_approval`` and the job returns (no task, no memory held).
- A run started on an instance that runs a worker has its first job inserted already taken
  by that instance, and advances there (local_dispatch.py); every later advance is queued.
- Jobs of one run share a procrastinate ``lock`` (the run id), so a run never has two
  executors at once, and a ``queueing_lock``, so it is queued at most once.
- A decision, an expiry or a cancellation enqueues the run's continuation in the same
  transaction as the request's compare-and-set; an expiry is a job scheduled for the
  request's expiry tick (the database's clock; one job per tick, see expiry_tick).
- Workers heartbeat; a worker's jobs whose heartbeats stopped are retried by live workers.
  Each job raises the run's fencing counter first, so a worker wrongly declared dead cannot
  checkpoint, log events or claim a tool call afterwards; the tool ledger keeps every tool
  at most once whatever happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from procrastinate import App
from procrastinate import exceptions as pq_exceptions
from procrastinate.jobs import Status
from procrastinate.tasks import Task

from hookgate.approvals.continuations import RunContinuations
from hookgate.approvals.records import ConfirmationRequest
from hookgate.approvals.service import ApprovalAsk
from hookgate.engines.events import event_of
from hookgate.engines.interrupts import Fenced, RunParked
from hookgate.engines.state import RunState
from hookgate.retries import RetryCallState, retrying, wait_from
from hookgate.runs.executors.base import RunEndings
from hookgate.runs.executors.local_dispatch import LocalDispatch
from hookgate.runs.executors.procrastinate_private import (
    SUBMIT,
    SUBMIT_TAKEN,
    DriverConnector,
    TakenJobEnd,
    check_schema,
    defer_values,
    hold_queued,
    install_schema,
    orphaned_runs,
    queue_in_transaction,
    take_in_transaction,
    worker_gone,
)
from hookgate.runs.executors.settings import WorkerSettings
from hookgate.storage.backends.postgresql import PostgresBackend
from hookgate.storage.fencing import Fence, take_over, take_over_reading
from hookgate.storage.runs import run_status
from hookgate.storage.transaction import after_commit

if TYPE_CHECKING:
    from hookgate.runs.notifications import Notifications
    from hookgate.runs.runner import Runner
    from hookgate.storage.database import Database
    from hookgate.storage.transaction import Transaction

log = logging.getLogger(__name__)
#: The first and the longest pause before the worker starts again after an error.
WORKER_RESTART_S = (0.5, 30.0)
#: Tries to queue a job or hold the one queued (each miss means a worker just took it).
_DEFER_ATTEMPTS = 5

QUEUE = "hookgate_runs"
#: The fence of a run whose first job its own submitter took (a takeover raises it past).
FIRST_FENCE = 1
ADVANCE_TASK = "hookgate.advance_run"
EXPIRE_TASK = "hookgate.expire_requests"
#: A worker fetches the highest priority first, walking an index in (priority, id) order:
#: advances rank above the expiry jobs, one scheduled per waiting request, so a decision's
#: advance is found at the head of that index instead of after every future expiry.
ADVANCE_PRIORITY = 10
#: A tick queued here counts as queued until this long before it is due (the database's
#: clock, which runs the job, may be ahead of this host's).
TICK_MARGIN = timedelta(seconds=5)


def expiry_tick(expires_at: datetime, tick_s: float) -> datetime:
    """The end of the tick ``expires_at`` falls in: requests expiring within one tick share
    one scheduled job, so the queue holds at most (longest timeout / tick) of them however
    many runs wait, and a request ends at most one tick after its expiry."""
    epoch = expires_at.timestamp()
    return datetime.fromtimestamp(math.ceil(epoch / tick_s) * tick_s, tz=UTC)


#: The statuses of a stored run that a decision on its request continues.
CONTINUED_STATUSES = ("running", "awaiting_approval")


class JobQueue:
    """The procrastinate app of one database's run queue: the tasks of runs (the executor)
    and of escalation (its jobs) join it, and both queue their jobs through `defer`."""

    def __init__(self, db: Database, *, wakeups: Notifications | None = None) -> None:
        """``wakeups``: the process's LISTEN connection, which the worker then shares."""
        self.db = db
        self.app = App(connector=DriverConnector(db, wakeups=wakeups, conninfo=db.libpq_url,
                                                 min_size=1, max_size=10))

    async def defer(self, session: Transaction, task: Task[Any, Any, Any], *, lock: str | None,
                    queueing_lock: str, schedule_at: datetime | None = None,
                    **kwargs: Any) -> None:
        """Queue ``task`` in ``session``'s transaction (an ORM session's or a decision's on
        the driver), once per ``queueing_lock``."""
        job = task.configure(lock=lock, queueing_lock=queueing_lock,
                             schedule_at=schedule_at).make_new_job(**kwargs)
        for _ in range(_DEFER_ATTEMPTS):
            # One statement that a job already queued cannot refuse (it inserts nothing):
            # no savepoint, and the caller's transaction goes on either way.
            if await queue_in_transaction(session, job) is not None:
                return
            # The job already queued could be taken by a worker before this transaction
            # commits and read the state from before it (a decision's continuation lost,
            # the run left waiting). Holding its row until the commit keeps workers off it
            # (they skip locked jobs); if a worker took it meanwhile, queue a new one.
            if await hold_queued(session, queueing_lock):
                return
        log.warning("could not queue or hold a job with queueing lock %s", queueing_lock)


class QueueExecutor:
    """Runs advance as jobs of the procrastinate queue on the server's PostgreSQL."""

    def __init__(self, runner: Runner, *, jobs: JobQueue, continuations: RunContinuations,
                 worker: bool = True, settings: WorkerSettings | None = None) -> None:
        """``jobs`` is the procrastinate app this executor's tasks join (built before the
        approvals, whose escalation jobs share it); the executor registers with
        ``continuations`` (the approvals' port) to continue parked runs."""
        self.runner = runner
        self.run_worker = worker
        self.settings = settings or WorkerSettings()
        self.jobs = jobs
        self.app = jobs.app
        self.advance_task: Task[Any, Any, Any] = self.app.task(
            name=ADVANCE_TASK, queue=QUEUE, priority=ADVANCE_PRIORITY)(self._advance_job)
        self.expire_task: Task[Any, Any, Any] = self.app.task(
            name=EXPIRE_TASK, queue=QUEUE)(self._expire_job)
        #: Root runs advancing in this process (how many jobs of each: a job superseded by
        #: a takeover in this same process may still be unwinding): their waiting calls park.
        self.advancing: Counter[str] = Counter()
        self._endings = RunEndings()
        #: The jobs of runs started here, taken here (only where a worker runs).
        self.taken = LocalDispatch(self.app, self.settings)
        self._worker: asyncio.Task[None] | None = None
        self._reaper: asyncio.Task[None] | None = None
        #: The expiry ticks whose job this process has queued (see `_expire_at`).
        self._ticks_queued: set[datetime] = set()
        continuations.register(self)

    # -- lifecycle -------------------------------------------------------------------------

    async def install_schema(self) -> None:
        """Create procrastinate's tables if they are missing (call under the start-up
        lock: several processes may start at once)."""
        await install_schema(self.runner.db)
        await check_schema(self.runner.db)  # fails loudly on a schema it was not written for

    async def start(self) -> None:
        await self.app.open_async()
        if not self.run_worker:
            return
        await self.taken.start()
        self._worker = asyncio.create_task(self._work(), name="hookgate-worker")
        self._reaper = asyncio.create_task(self._retry_stalled(), name="hookgate-reaper")

    async def _work(self) -> None:
        """procrastinate's worker, started again whenever it stops on an error: one failed
        statement in its fetch loop (the database away for a moment) ends the worker, and
        the server would go on accepting runs that no one advances."""
        s = self.settings
        loop = asyncio.get_running_loop()
        began, quick_failures = 0.0, 0

        async def work() -> None:
            nonlocal began
            began = loop.time()
            await self.app.run_worker_async(
                queues=[QUEUE], concurrency=s.concurrency, install_signal_handlers=False,
                update_heartbeat_interval=s.heartbeat_s,
                stalled_worker_timeout=s.stalled_after_s,
                shutdown_graceful_timeout=s.shutdown_grace_s, delete_jobs="successful",
                listen_notify=True, fetch_job_polling_interval=s.poll_s)

        def pause(state: RetryCallState) -> float:
            nonlocal quick_failures
            first, ceiling = WORKER_RESTART_S[0], WORKER_RESTART_S[-1]
            # A worker that had been working for a while has no backlog of failures.
            ran_long = loop.time() - began > ceiling * 2
            quick_failures = 1 if ran_long else quick_failures + 1
            return float(min(first * 2 ** (quick_failures - 1), ceiling))

        def report(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome is not None else None
            log.error("the run worker stopped on an error; it starts again in %.1fs "
                      "(its jobs in flight are retried as a dead worker's)",
                      state.upcoming_sleep, exc_info=error)

        # No stop: the worker is started again for as long as the server runs; a return is
        # a stop as asked, a cancellation goes straight out.
        await retrying(wait=wait_from(pause), before_sleep=report)(work)

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        await asyncio.gather(self._stop_worker(), self.taken.stop())
        await self._endings.drain()
        await self.app.close_async()

    async def _stop_worker(self) -> None:
        if self._worker is not None:
            self._worker.cancel()  # procrastinate stops gracefully, then aborts what is left
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._worker

    # -- submitting and continuing ---------------------------------------------------------

    async def submit(self, state: RunState) -> None:
        """Store a new run with its first job: ONE statement, so both commit or neither
        (a run stored without its job would start only at the next recovery; a job without
        its run would find nothing to do). Where this process runs a worker with room, the
        job is inserted taken and the run advances here (local_dispatch.py); else any worker
        fetches it."""
        m = self.runner
        backend = m.db.backend
        if not isinstance(backend, PostgresBackend):
            raise RuntimeError("the run queue needs PostgreSQL (asyncpg or psycopg)")
        job = self.advance_task.configure(lock=state.run_id, queueing_lock=state.run_id
                                          ).make_new_job(run_id=state.run_id)
        checkpoint = m.store.checkpoint(state)
        taker = self.taken.worker_id if self.taken.can_take() else None
        row = None
        if taker is not None:
            try:
                row = await backend.insert_run_with(SUBMIT_TAKEN, checkpoint,
                                                    *defer_values(job), taker,
                                                    fence=FIRST_FENCE)
            except Exception as exc:
                if not worker_gone(exc):
                    raise
                self.taken.lost(taker)  # nothing was stored: the queue takes the run
        if row is None:
            await backend.insert_run_with(SUBMIT, checkpoint, *defer_values(job))
            return
        # The run advances from the state as stored (not the caller's object, which the
        # caller may still read), under the fence the statement gave it.
        stored = checkpoint.state_json
        m.bus.taken(state.run_id)
        end = TakenJobEnd(int(row[0]), state.run_id)
        self.taken.run(end.job_id, self._advance(
            state.run_id, Fence(state.run_id, FIRST_FENCE), stored, end), end)

    async def continue_run(self, run_id: str, session: Transaction | None = None) -> None:
        """Queue the run's next advance (at most one is queued; one already queued will
        see whatever changed)."""
        if session is not None:
            await self._defer_advance(session, run_id)
            return
        async with self.runner.db.transaction() as s:
            await self._defer_advance(s, run_id)

    async def _defer_advance(self, session: Transaction, run_id: str) -> None:
        await self._defer(session, self.advance_task, lock=run_id, queueing_lock=run_id,
                          run_id=run_id)

    async def _defer(self, session: Transaction, task: Task[Any, Any, Any], *, lock: str | None,
                     queueing_lock: str, schedule_at: datetime | None = None,
                     **kwargs: Any) -> None:
        await self.jobs.defer(session, task, lock=lock, queueing_lock=queueing_lock,
                              schedule_at=schedule_at, **kwargs)

    async def after_transition(self, session: Transaction,
                               request: ConfirmationRequest) -> None:
        # Stored runs continue from the queue: the request's own, or the root a delegated
        # child parked with (a child that could not park waits in memory: no row).
        run_id = request.stored_run_id
        # A person's decision continues the run on this instance (the taking statement
        # itself checks that the run still waits); a cancellation or an expiry queues it
        # (a cancel holds the run's fence and must save before any advance).
        decided = request.status in ("approved", "rejected")
        if decided and await self._take_advance(session, run_id, request):
            return
        if await run_status(session, run_id) not in CONTINUED_STATUSES:
            return
        await self._defer_advance(session, run_id)

    async def _take_advance(self, session: Transaction, run_id: str,
                            decided: ConfirmationRequest) -> bool:
        """Take the run's next advance in ``session``'s transaction, to run here once it
        commits (no NOTIFY, no fetch: the decision's own instance continues the run);
        False when this process cannot take it (no worker with room, a job of the run
        running, the worker pruned) or the run no longer waits: the caller reads which.
        ``decided``: the request as this transaction wrote it, where the run resumes."""
        taker = self.taken.worker_id if self.taken.can_take() else None
        if taker is None:
            return False
        job = self.advance_task.configure(lock=run_id, queueing_lock=run_id
                                          ).make_new_job(run_id=run_id)
        job_id = await take_in_transaction(session, job, taker, run_id, CONTINUED_STATUSES)
        if job_id is None:
            return False
        loop = asyncio.get_running_loop()

        end = TakenJobEnd(job_id, run_id)

        def committed() -> None:
            # Runs inside the commit (a session's greenlet, or the driver's transaction):
            # start the job on the loop, after the commit.
            loop.call_soon(self.taken.run, job_id, self._advance_job(run_id, end, decided),
                           end)

        after_commit(session, committed)
        return True

    def parks(self, ask: ApprovalAsk) -> bool:
        # A child's call parks the stored run it runs inside, when that run advances here.
        root = ask.metadata.get("root_run_id")
        return (root if isinstance(root, str) else ask.run_id) in self.advancing

    async def cancel(self, run_id: str) -> bool:
        m = self.runner
        fence = await take_over(m.db, run_id)  # the executor holding it can write no more
        state = await m.store.load_to_resume(run_id, fence) if fence is not None else None
        if fence is None or state is None or state.finished:
            return False
        await m.approvals.cancel_run(run_id, "the run was cancelled")
        state.status = "cancelled"
        done = event_of("done", {"status": "cancelled", "answer": state.answer},
                        seq=len(await m.bus.log.after(run_id, 0)) + 1)
        state.trace.append(done.to_dict())
        await m.store.save(state, fence=fence, events=[done])  # one transaction
        return True

    # -- the jobs --------------------------------------------------------------------------

    async def _advance_job(self, run_id: str, end: TakenJobEnd | None = None,
                           decided: ConfirmationRequest | None = None) -> None:
        """``end``: the job was taken by this process (local_dispatch.py), and the run's end
        ends it too; ``decided``: it was taken by the decision on that request, in the
        transaction that returned it."""
        taken = await take_over_reading(self.runner.db, run_id)
        if taken is not None:
            self.runner.bus.taken(run_id)
            await self._advance(run_id, *taken, end, decided)

    async def _advance(self, run_id: str, fence: Fence, stored: str,
                       end: TakenJobEnd | None = None,
                       decided: ConfirmationRequest | None = None) -> None:
        """Advance the run from its ``stored`` state, as the executor holding ``fence``
        (taken by this process: `EventBus.taken`, released here)."""
        try:
            await self._advance_taken(run_id, fence, stored, end, decided)
        finally:
            self.runner.bus.released(run_id)

    async def _advance_taken(self, run_id: str, fence: Fence, stored: str,
                             end: TakenJobEnd | None,
                             decided: ConfirmationRequest | None = None) -> None:
        m = self.runner
        try:
            # A state that no longer loads is failed here, as on the in-process path.
            state = await m.store.parse_to_resume(run_id, stored, fence)
            if state is None:
                return
            advance = await m.prepare(state, fence, end, decided)
        except Fenced:
            return
        if advance is None:
            return
        self.advancing[run_id] += 1
        feed = m.bus.open(run_id, m.history(state), fence=fence, org_id=state.org_id)
        try:
            await advance(lambda e: m.bus.publish(run_id, e, feed))
        except RunParked as parked:
            await self._park(state, parked, fence)
        except Fenced as exc:
            log.warning("%s", exc)
        except asyncio.CancelledError:
            # The worker is stopping: the run continues on another worker right away.
            with contextlib.suppress(Exception):
                await asyncio.shield(self.continue_run(run_id))
            raise
        finally:
            self.advancing[run_id] -= 1
            if self.advancing[run_id] <= 0:
                del self.advancing[run_id]
            await m.bus.close(run_id, feed)
        if state.finished:
            await m.settle_requests(state)
            self._endings.ended(state, m.on_run_end)

    async def _park(self, state: RunState, parked: RunParked, fence: Any) -> None:
        m = self.runner
        state.status = "awaiting_approval"
        try:
            # Through the bus: the events not yet logged (the pending request's among them)
            # commit with the parked state, after any write of the run still in flight.
            await m.bus.checkpoint(state.run_id, lambda events: m.store.save(
                state, fence=fence, events=events), fence=fence)
        except Fenced as exc:
            log.warning("%s", exc)
            return
        expires_at = parked.expires_at
        if not parked.made or expires_at is None:
            # A decision that landed while the run was parking found the job still holding
            # the run, and queued its continuation already; this covers the narrow case
            # where it landed before the job took the run. A request the parking call made
            # itself cannot have been decided before.
            request = await m.approvals.store.get(parked.request_id)
            if request is None:
                return
            if not request.pending:
                await self.continue_run(state.run_id)
                return
            expires_at = request.expires_at
        await self._expire_at(expires_at)

    async def _expire_at(self, expires_at: datetime) -> None:
        """Have the expiry job of ``expires_at``'s tick queued: one per tick, so a tick this
        process queued already (and not yet due) needs no statement at all."""
        due = expiry_tick(expires_at, self.settings.expiry_tick_s)
        if due in self._ticks_queued and due > datetime.now(UTC) + TICK_MARGIN:
            return
        async with self.runner.db.transaction() as s:
            await self._defer(s, self.expire_task, lock=None,
                              queueing_lock=f"expire:{due.isoformat()}",
                              schedule_at=due, due=due.isoformat())
        now = datetime.now(UTC)
        self._ticks_queued = {t for t in self._ticks_queued if t > now}
        self._ticks_queued.add(due)

    async def _expire_job(self, due: str = "", request_id: str = "") -> None:
        # One job per tick ends every request due by then (request_id: jobs queued by
        # earlier versions, one per request).
        # Expiry is judged by the database's clock; each expiry queues its run's advance.
        await self.runner.approvals.expire_overdue()

    async def recover(self) -> int:
        """Queue the runs that should advance but have no job: a run ``running`` without
        one, or ``awaiting_approval`` with no request pending any more (decided by a
        process that has no queue, e.g. the CLI). Returns how many were queued."""
        async with self.runner.db.transaction() as s:
            run_ids = await orphaned_runs(s)
            for run_id in run_ids:
                await self._defer_advance(s, run_id)
        if run_ids:
            log.info("queued %d run(s) that had no job", len(run_ids))
        return len(run_ids)

    async def _retry_stalled(self) -> None:
        jobs = self.app.job_manager
        with contextlib.suppress(Exception):
            await self.recover()
        since_recovery = 0.0
        # A third of the stalled timeout: a dead worker's jobs move on within 4/3 of it,
        # and an idle cluster pays one query per worker per period, not per waiting run.
        period = max(self.settings.heartbeat_s, self.settings.stalled_after_s / 3)
        while True:
            await asyncio.sleep(period)
            since_recovery += period
            if since_recovery >= self.settings.stalled_after_s:
                since_recovery = 0.0
                with contextlib.suppress(Exception):
                    await self.recover()
            try:
                for job in await jobs.get_stalled_jobs(
                        queue=QUEUE, seconds_since_heartbeat=self.settings.stalled_after_s):
                    assert job.id is not None
                    try:
                        await jobs.retry_job(job)
                        log.warning("job %s (%s) of a dead worker is retried", job.id,
                                    job.task_name)
                    except pq_exceptions.UniqueViolation:
                        # The run's next advance is queued already; this one is done with.
                        await jobs.finish_job_by_id_async(job.id, Status.FAILED,
                                                          delete_job=False)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("retrying the jobs of dead workers failed")

