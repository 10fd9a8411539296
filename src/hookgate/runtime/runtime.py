"""The runtime every interface starts (the HTTP server, the MCP gateway, the demo): the
database, the approval service, the runs, the channels — started and stopped together, with
the declared orgs, users and agents synced in.

The executor follows the database: runs advance in this process for a SQLite file, and as
jobs of the run queue for PostgreSQL, where several instances share the work and
notifications carry run events and inbox changes between them.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, cast

from hookgate.approvals.continuations import RunContinuations
from hookgate.approvals.edits import agent_tool
from hookgate.approvals.escalation import Escalations
from hookgate.approvals.escalation_timers import EscalationTimers
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.claude_code.backend import ClaudeCodeBackend
from hookgate.external.calls import GuardedCalls
from hookgate.external.policy import declared_tool
from hookgate.hooks.services import HookServices
from hookgate.runs.executors.in_process import InProcessExecutor
from hookgate.runs.notifications import Notifications, Subscription, Wakers
from hookgate.runs.runner import Runner
from hookgate.runtime.channel_directory import CompletionNotices, ConfiguredChannels
from hookgate.runtime.declarations import write_declarations
from hookgate.runtime.deployment import Deployment
from hookgate.runtime.inbox import REQUESTS_CHANNEL, InboxFeed, RequestChanges
from hookgate.runtime.token_cache import TokenCache
from hookgate.storage.database import Database
from hookgate.storage.instances import url_shared_by_instances
from hookgate.storage.run_events import RUN_EVENTS_CHANNEL
from hookgate.storage.runs import DatabaseRunStore
from hookgate.storage.users import ACCESS_CHANNEL, user_for_token

if TYPE_CHECKING:
    from collections.abc import Callable

    from hookgate.runs.executors.escalation_jobs import EscalationJobs
    from hookgate.runs.executors.queue import JobQueue, QueueExecutor
    from hookgate.runs.redis_wakeups import RedisWakeups

log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class Caller:
    """The authenticated user of an API request."""

    user_id: str
    org_id: str
    admin: bool
    name: str = ""
    #: A service (agent) identity: acts for the people its calls name, never decides.
    service: bool = False
    #: The verified identity an OpenID Connect sign-in gave (None for an API token).
    issuer: str | None = None
    subject: str | None = None
    #: How the caller signed in: ``token`` (an API token) or ``oidc``.
    sign_in: str = "token"

    @property
    def verified_identity(self) -> str | None:
        """The identity a provider verified, as decisions record it (their channel
        identity): ``oidc:<issuer>#<subject>``; None for an API token's caller."""
        if self.sign_in != "oidc" or self.issuer is None or self.subject is None:
            return None
        return verified_identity(self.issuer, self.subject)


#: The longest identity a decision's record holds (its channel_identity column).
_IDENTITY_MAX = 256


def verified_identity(issuer: str, subject: str) -> str:
    """``oidc:<issuer>#<subject>``; one longer than the record holds is named by its sha256
    (``oidc:sha256:<hex>``), which the person's ``oidc_identities`` row matches."""
    text = f"oidc:{issuer}#{subject}"
    if len(text) <= _IDENTITY_MAX:
        return text
    return "oidc:sha256:" + hashlib.sha256(f"{issuer}#{subject}".encode()).hexdigest()


class Runtime:
    """Everything one process runs, whichever interface serves it. Built in `__init__`, in
    dependency order, each part given what it needs through its constructor."""

    def __init__(self, deployment: Deployment, *, sweep_interval: float = 2.0,
                 worker: bool = True) -> None:
        self.deployment = deployment
        #: PostgreSQL: several instances share the work; a SQLite file: this process owns it.
        self.shared = shared = url_shared_by_instances(deployment.database_url)
        #: Wake-ups between instances over Redis pub/sub (redis_url, PostgreSQL only).
        self.redis_wakeups = (self._redis_wakeups(deployment.redis_url)
                              if deployment.redis_url and shared else None)
        self.db = db = Database(deployment.database_url, publisher=self.redis_wakeups)
        if not shared and not worker:
            raise ValueError(
                "a SQLite database is served by one instance that runs API and worker "
                "together; splitting the roles needs PostgreSQL (database: postgresql://...)")
        if deployment.model_for is None:
            raise ValueError("the deployment declares no models")
        if deployment.redis_url and not shared:
            log.warning("redis_url is ignored: with a SQLite file one instance serves every "
                        "stream from memory (Redis carries wake-ups between instances on "
                        "PostgreSQL)")
        #: Recent token lookups (runtime/auth.py); forgotten when any instance changes who
        #: may sign in.
        self.token_cache: TokenCache[Caller] = TokenCache()
        self.channels = ConfiguredChannels(deployment.channels)
        # Agents listing channel_notify get one that posts through this server's channels.
        agents = self.channels.with_notify_tool(deployment.agents)
        # The approvals' port to the run layer: the run queue registers with it (PostgreSQL).
        continuations = RunContinuations()
        #: PostgreSQL without Redis: the process's one LISTEN connection (run events, request
        #: changes, access changes and the queue worker's job notifications).
        self.pg_notifications = (Notifications(db.libpq_url)
                                 if shared and self.redis_wakeups is None else None)
        #: PostgreSQL: the procrastinate app that runs and escalations queue their jobs on.
        self.jobs = jobs = (self._job_queue(db, self.pg_notifications) if shared else None)
        self.approvals = PersistentApprovals(
            db, channels=self.channels, inbox_url=self.inbox_url,
            sweep_interval=sweep_interval,
            # An approver's edit is checked against the tool's own schema (approvals/edits.py).
            # A tool the agent does not declare (hookgate.external): the schema its runtime
            # declared with the request.
            tool_of=lambda request: agent_tool(agents, request) or declared_tool(
                request.tool_name, request.context),
            # What must approve an edited call is read from the agent's configuration now.
            agent_of=lambda request: agents.get(request.agent_id),
            # Escalations are jobs of the run queue on PostgreSQL, timers in this process on
            # a SQLite file.
            escalations=partial(Escalations, agent_name=self._agent_name,
                                scheduler=(EscalationTimers if jobs is None
                                           else self._escalation_jobs(jobs))),
            continuations=continuations,
        )
        assert self.approvals.escalations is not None
        #: Reminders, escalation and unreachable approvers (hookgate.approvals.escalation).
        self.escalations = self.approvals.escalations
        self.escalation_timers: EscalationTimers | None = (
            self.escalations.scheduler if isinstance(self.escalations.scheduler, EscalationTimers)
            else None)
        self.services = HookServices(approvals=self.approvals, database=db)
        self.inbox = InboxFeed()
        followers = Wakers() if shared else None
        self.runs = Runner(
            db, self.approvals, self.services, agents, deployment.model_for,
            max_steps=deployment.max_steps, workflows=deployment.workflows,
            executor=(InProcessExecutor if jobs is None
                      else self._queue_executor(jobs, continuations, worker=worker)),
            on_run_end=CompletionNotices(self.channels, agents, DatabaseRunStore(db),
                                         self.run_url).run_ended,
            followers=followers)
        #: Answers Claude Code's http hooks (POST /api/claude-code/hooks).
        self.claude_code = ClaudeCodeBackend(self.approvals, self.services, self.runs.ledger)
        #: Answers the guarded-call API and the in-process guard (hookgate.external.calls).
        self.guarded = GuardedCalls(self.approvals, self.services, self.runs.ledger)
        self.queue: QueueExecutor | None = None
        self.notifications: Subscription | None = None
        if followers is not None:
            self.queue = cast("QueueExecutor", self.runs.executor)
            self.notifications = self._listen(followers)
        else:
            self.approvals.on_change(self.inbox.publish)
        self.started = False

    @staticmethod
    def _redis_wakeups(url: str) -> RedisWakeups:
        from hookgate.runs.redis_wakeups import RedisWakeups  # the optional extra

        return RedisWakeups(url)

    # The run queue's parts, imported only for PostgreSQL (procrastinate is not needed to
    # serve a SQLite file).
    @staticmethod
    def _job_queue(db: Database, wakeups: Notifications | None) -> JobQueue:
        from hookgate.runs.executors.queue import JobQueue

        return JobQueue(db, wakeups=wakeups)

    @staticmethod
    def _escalation_jobs(jobs: JobQueue) -> Callable[[Escalations], EscalationJobs]:
        from hookgate.runs.executors.escalation_jobs import EscalationJobs

        return partial(EscalationJobs, jobs)

    def _queue_executor(self, jobs: JobQueue, continuations: RunContinuations, *,
                        worker: bool) -> Callable[[Runner], QueueExecutor]:
        from hookgate.runs.executors.queue import QueueExecutor

        return partial(QueueExecutor, jobs=jobs, continuations=continuations, worker=worker,
                       settings=self.deployment.worker)

    def _listen(self, followers: Wakers) -> Subscription:
        # Other instances' run events and request changes reach this one as wake-ups:
        # PostgreSQL notifications, or Redis pub/sub with redis_url.
        notes: Subscription
        if self.redis_wakeups is not None:
            notes = self.redis_wakeups
        else:
            assert self.pg_notifications is not None
            notes = self.pg_notifications
        notes.on(RUN_EVENTS_CHANNEL, followers.wake)
        changes = RequestChanges(self.db, self.approvals, self.inbox)
        notes.on(REQUESTS_CHANNEL, changes.received)
        # Before any later notification is handled (PostgreSQL delivers them in commit
        # order): a request made after a revocation finds the revoked token forgotten here.
        notes.on(ACCESS_CHANNEL, lambda _change: self.token_cache.clear())
        self.approvals.announce_with(changes.announce_within, changes.announce)
        return notes

    def _agent_name(self, agent_id: str) -> str:
        agent = self.deployment.agents.get(agent_id)
        return agent.name if agent is not None else agent_id

    def inbox_url(self, request_id: str) -> str | None:
        return self._portal_link(f"confirmations/{request_id}")

    def run_url(self, run_id: str) -> str | None:
        return self._portal_link(f"runs/{run_id}")

    def _portal_link(self, route: str) -> str | None:
        base = self.deployment.public_url
        return f"{base.rstrip('/')}/#/{route}" if base else None

    async def start(self) -> None:
        # Any number of instances may start at once on one PostgreSQL: one at a time
        # migrates, installs the queue's schema and writes the declarations.
        async with self.db.startup_lock():
            await self.db.upgrade()
            if self.queue is not None:
                await self.queue.install_schema()
            await self.sync()
        await self.start_wakeups()
        await self.approvals.start()
        assert self.runs.executor is not None
        await self.runs.executor.start()
        if self.escalation_timers is not None:
            await self.escalation_timers.start()
        else:  # jobs queued already are found again by their queueing lock
            await self.escalations.reschedule_all()
        self.started = True

    async def start_wakeups(self) -> None:
        """Subscribe to other processes' changes (PostgreSQL): their run events wake this
        process's streams, and their decisions its waiting calls at once (the approvals'
        sweep is then only the fallback). Also for processes that run no server, such as
        ``hookgate mcp stdio``."""
        if self.notifications is not None:
            await self.notifications.start()

    async def stop_wakeups(self) -> None:
        if self.notifications is not None:
            await self.notifications.stop()

    async def stop(self) -> None:
        self.approvals.begin_shutdown()
        if self.escalation_timers is not None:
            await self.escalation_timers.stop()
        await self.runs.stop()
        await self.stop_wakeups()
        await self.approvals.stop()
        await self.channels.aclose()
        await self.db.dispose()
        self.started = False

    async def sync(self) -> None:
        """Write the declared orgs, users and agents (runtime/declarations.py) and the
        channels into the database, as upserts (any number of instances may sync at once)."""
        await write_declarations(self.db, self.deployment)
        await self.channels.sync(self.db)

    async def authenticate(self, token: str) -> Caller | None:
        """The caller of a token: refused when revoked, expired, the user is disabled, or
        a person's token while `oidc.tokens_for_people` is false."""
        user = await user_for_token(self.db, token)
        if user is None:
            return None
        oidc = self.deployment.oidc
        if oidc is not None and not oidc.tokens_for_people and not user.service:
            # People sign in through the identity provider only (oidc.tokens_for_people).
            return None
        return Caller(user.id, user.org_id, user.admin, user.name, bool(user.service))
