"""Jobs a process takes as it queues them: a run started on an instance that runs a worker
advances right there, without a trip through the queue.

Queued the usual way, a new run's job is inserted ``todo``, its NOTIFY wakes every worker,
one of them fetches it (procrastinate's fetch function: the costliest statement of a run,
~0.4 ms of PostgreSQL's time) and raises the run's fence to read its state back. Taken, the
job is inserted ``doing`` under a worker this process registered with procrastinate (the
same statement that stores the run, its fence already at 1), and the run advances from the
state in hand. Everything else stays procrastinate's: the job holds the run's ``lock`` (no
other job of the run is fetched while it runs), this process heartbeats the worker, and if
the process dies its taken jobs are stalled jobs like any other (queue.py retries them; the
next executor's takeover raises the fence, so nothing this process still writes lands).

The insert itself writes procrastinate's private schema, so it lives with the rest of that
in procrastinate_private.py (``SUBMIT_TAKEN``, ``worker_gone``). A live process can lose its
worker too: when its heartbeats stop for longer than ``stalled_after_s`` (the process or the
database paused), another worker prunes the row, and a job inserted under that id would
break the row's foreign key. The insert that finds the worker gone says so (``lost``): the
run goes through the queue instead, and a new worker is registered for the next ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from procrastinate import App
from procrastinate.jobs import Status

from hookgate.runs.executors.settings import WorkerSettings

if TYPE_CHECKING:
    from hookgate.runs.executors.procrastinate_private import TakenJobEnd

log = logging.getLogger(__name__)


class LocalDispatch:
    """The jobs this process inserted already taken, their worker and its heartbeat."""

    def __init__(self, app: App, settings: WorkerSettings) -> None:
        self._jobs = app.job_manager
        self._settings = settings
        self.worker_id: int | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._heartbeat: asyncio.Task[None] | None = None
        self._registering: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Register this process's worker for the jobs it takes, and heartbeat it."""
        if not self._settings.take_own_runs:
            return
        self.worker_id = await self._jobs.register_worker()
        self._heartbeat = asyncio.create_task(self._beat(),
                                              name="hookgate-taken-jobs-heartbeat")

    def can_take(self) -> bool:
        """Whether a new job can be taken here (a registered worker with room left: as
        many at once as the worker's ``concurrency``); else it is queued for any worker."""
        return (self._settings.take_own_runs and self.worker_id is not None
                and self._heartbeat is not None
                and not self._heartbeat.done()
                and len(self._running) < self._settings.concurrency)

    def lost(self, worker_id: int) -> None:
        """Worker ``worker_id``'s row is gone (pruned as stalled): take no job until a new
        one is registered (in the background, tried again until the database answers)."""
        if self.worker_id != worker_id:
            return  # already replaced, or being replaced
        log.warning("worker %s was pruned as stalled; registering a new one for the runs "
                    "started here", worker_id)
        self.worker_id = None
        self._registering = asyncio.get_running_loop().create_task(
            self._register_again(), name="hookgate-taken-jobs-register")

    async def _register_again(self) -> None:
        while True:
            try:
                self.worker_id = await self._jobs.register_worker()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("registering a worker failed (%s); trying again in %ss", exc,
                            self._settings.heartbeat_s)
            await asyncio.sleep(self._settings.heartbeat_s)

    def run(self, job_id: int, body: Coroutine[Any, Any, None],
            end: TakenJobEnd | None = None) -> None:
        """Run ``body`` (the job's work) in a task of its own, then finish job ``job_id`` as
        procrastinate's worker would: deleted when it succeeded, kept ``failed`` or
        ``aborted`` (the process stopping) otherwise; unless ``end`` says the run's end
        deleted it already."""
        task = asyncio.get_running_loop().create_task(self._run(job_id, body, end))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, job_id: int, body: Coroutine[Any, Any, None],
                   end: TakenJobEnd | None) -> None:
        status = Status.FAILED
        try:
            await body
            status = Status.SUCCEEDED
        except asyncio.CancelledError:
            status = Status.ABORTED
            raise
        except Exception:
            log.exception("job %s failed", job_id)
        finally:
            # Shielded: a stop that cancels the job still finishes it. A finish that fails
            # (tried again for a while on the driver) leaves the job "doing" under a worker
            # that unregisters when the process stops: a stalled job, retried then. A job
            # the statement storing its run's end deleted is finished already.
            if end is None or not end.done:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._jobs.finish_job_by_id_async(
                        job_id, status, delete_job=status is Status.SUCCEEDED))

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self._settings.heartbeat_s)
            worker_id = self.worker_id
            if worker_id is None:
                continue  # a new one is being registered
            try:
                await self._jobs.update_heartbeat(worker_id)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # Missed beats for stalled_after_s make this worker's jobs stalled: another
                # worker takes their runs over (fenced), as with any worker cut off.
                log.warning("the heartbeat of worker %s failed: %s", worker_id, exc)

    async def stop(self) -> None:
        """Let the jobs in flight finish for the grace period, cancel the rest (each queues
        its run's continuation first), then unregister the worker."""
        if self._running:
            _, late = await asyncio.wait(set(self._running),
                                         timeout=self._settings.shutdown_grace_s)
            for task in late:
                task.cancel()
            if late:
                await asyncio.gather(*late, return_exceptions=True)
        for helper in (self._heartbeat, self._registering):
            if helper is not None:
                helper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await helper
        self._heartbeat = self._registering = None
        if self.worker_id is not None:
            worker_id, self.worker_id = self.worker_id, None
            try:
                await self._jobs.unregister_worker(worker_id)
            except Exception as exc:
                # Its heartbeat stops here: procrastinate prunes it as stalled later.
                log.warning("unregistering worker %s failed: %s", worker_id, exc)
