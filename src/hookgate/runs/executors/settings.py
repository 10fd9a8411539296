"""The run worker's settings (the configuration's ``worker:`` section, PostgreSQL only)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class WorkerSettings:
    """How a worker runs jobs and notices dead workers."""

    concurrency: int = 100
    heartbeat_s: float = 5.0
    stalled_after_s: float = 30.0
    shutdown_grace_s: float = 5.0
    #: How often an idle worker looks for jobs that became due (a follow-up's or an
    #: expiry's scheduled job); a job due at once wakes it through NOTIFY instead.
    poll_s: float = 5.0
    #: Requests expiring within one tick share one scheduled expiry job (see
    #: executors/queue.py expiry_tick); a request ends at most this long after it expired.
    expiry_tick_s: float = 5.0
    #: Runs started here advance here, their jobs inserted taken (local_dispatch.py), up to
    #: ``concurrency`` at once; False: every run goes through the queue.
    take_own_runs: bool = True
