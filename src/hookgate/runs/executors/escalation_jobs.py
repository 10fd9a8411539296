"""The follow-up scheduler on PostgreSQL: each request's next reminder or escalation is a
procrastinate job scheduled for its time (one queued per request, by queueing lock), which
schedules the next one when it ran. Jobs are rows, so they survive restarts; which
instance runs one does not matter, since each follow-up is claimed by compare-and-set."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from procrastinate.tasks import Task

from hookgate.approvals.escalation import Escalations
from hookgate.runs.executors.queue import QUEUE, JobQueue

FOLLOWUP_TASK = "hookgate.approval_followup"


class EscalationJobs:
    """Schedules `Escalations.run_due` as jobs of the run queue."""

    def __init__(self, jobs: JobQueue, escalations: Escalations) -> None:
        self.jobs = jobs
        self.escalations = escalations
        self.task: Task[Any, Any, Any] = jobs.app.task(
            name=FOLLOWUP_TASK, queue=QUEUE)(self._job)

    async def schedule(self, request_id: str, at: datetime) -> None:
        async with self.jobs.db.transaction() as s:
            await self.jobs.defer(s, self.task, lock=None,
                                  queueing_lock=f"followup:{request_id}", schedule_at=at,
                                  request_id=request_id)

    async def _job(self, request_id: str) -> None:
        # While this job runs it is no longer 'todo', so its queueing lock lets the next
        # follow-up of the request be queued from here.
        again = await self.escalations.run_due(request_id)
        if again is not None:
            await self.schedule(request_id, again)
