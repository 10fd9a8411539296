"""The runtime every interface starts (the HTTP server, the MCP gateway, the demo): the
database, the approval service, the runs, the channels — started and stopped together, with
the declared orgs, users and agents synced in.

The executor follows the database: runs advance in this process for a SQLite file, and as
jobs of the run queue for PostgreSQL, where several instances share the work and
notifications carry run events and inbox changes between them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from sqlalchemy import Table

from hookgate.approvals.edits import agent_tool
from hookgate.approvals.followup_timers import FollowupTimers
from hookgate.approvals.followups import Followups
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.claude_code.backend import ClaudeCodeBackend
from hookgate.external.calls import GuardedCalls
from hookgate.external.policy import declared_tool
from hookgate.hooks.services import HookServices
from hookgate.runtime.channel_directory import CompletionNotices, ConfiguredChannels
from hookgate.runtime.deployment import Deployment
from hookgate.runtime.executors.in_process import InProcessExecutor
from hookgate.runtime.inbox import REQUESTS_CHANNEL, InboxFeed, RequestChanges
from hookgate.runtime.notifications import Notifications, Subscription, Wakers
from hookgate.runtime.run_manager import RunManager
from hookgate.runtime.token_cache import TokenCache
from hookgate.storage.database import Database
from hookgate.storage.orgs import sync_orgs
from hookgate.storage.run_events import RUN_EVENTS_CHANNEL
from hookgate.storage.tables import AgentRow
from hookgate.storage.types import utcnow
from hookgate.storage.upserts import upsert
from hookgate.storage.users import ACCESS_CHANNEL, sync_declared_users, user_for_token

if TYPE_CHECKING:
    from hookgate.runtime.executors.queue import QueueExecutor

log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class Caller:
    """The authenticated user of an API request."""

    user_id: str
    org_id: str
    admin: bool
    name: str = ""


class Runtime:
    """Everything one process runs, whichever interface serves it."""

    def __init__(self, deployment: Deployment, *, sweep_interval: float = 2.0,
                 worker: bool = True) -> None:
        self.deployment = deployment
        self.db = Database(deployment.database_url)
        #: Recent token lookups (runtime/auth.py); forgotten when any instance changes who
        #: may sign in.
        self.token_cache: TokenCache[Caller] = TokenCache()
        if self.db.is_sqlite and not worker:
            raise ValueError(
                "a SQLite database is served by one instance that runs API and worker "
                "together; splitting the roles needs PostgreSQL (database: postgresql://...)")
        self.channels = ConfiguredChannels(deployment.channels)
        self.approvals = PersistentApprovals(
            self.db, channels=self.channels, inbox_url=self.inbox_url,
            sweep_interval=sweep_interval,
        )
        #: Reminders, escalation and unreachable approvers (hookgate.approvals.followups).
        self.followups = Followups(self.approvals, agent_name=self._agent_name)
        self.approvals.followups = self.followups
        self.followup_timers: FollowupTimers | None = None
        self.services = HookServices(approvals=self.approvals, database=self.db)
        self.inbox = InboxFeed()
        if deployment.model_for is None:
            raise ValueError("the deployment declares no models")
        # Agents listing channel_notify get one that posts through this server's channels.
        agents = self.channels.with_notify_tool(deployment.agents)
        # An approver's edit is checked against the tool's own schema (approvals/edits.py).
        self.approvals.tool_of = lambda request: agent_tool(agents, request) or declared_tool(
            request.tool_name, request.context)
        # What must approve an edited call is read from the agent's configuration now.
        self.approvals.agent_of = lambda request: agents.get(request.agent_id)
        self.runs = RunManager(self.db, self.approvals, self.services, agents,
                               deployment.model_for, max_steps=deployment.max_steps,
                               workflows=deployment.workflows)
        #: Answers Claude Code's http hooks (POST /api/claude-code/hooks).
        self.claude_code = ClaudeCodeBackend(self.approvals, self.services, self.runs.ledger)
        #: Answers the guarded-call API and the in-process guard (hookgate.external.calls).
        self.guarded = GuardedCalls(self.approvals, self.services, self.runs.ledger)
        self.runs.on_run_end = CompletionNotices(self.channels, agents, self.runs.store,
                                                 self.run_url).run_ended
        self.notifications: Subscription | None = None
        self.queue: QueueExecutor | None = None
        if self.db.is_sqlite:
            self.approvals.on_change(self.inbox.publish)
            self.runs.executor = InProcessExecutor(self.runs)
            self.followup_timers = FollowupTimers(self.followups)
            self.followups.scheduler = self.followup_timers
        else:
            from hookgate.runtime.executors.queue import QueueExecutor  # only for PostgreSQL

            self.queue = QueueExecutor(self.runs, worker=worker, settings=deployment.worker)
            self.runs.executor = self.queue
            from hookgate.runtime.executors.followup_jobs import FollowupJobs

            self.followups.scheduler = FollowupJobs(self.queue, self.followups)
            self.notifications = self._listen()
        if deployment.redis_url and self.db.is_sqlite:
            log.warning("redis_url is ignored: with a SQLite file one instance serves every "
                        "stream from memory (Redis carries wake-ups between instances on "
                        "PostgreSQL)")
        self.started = False

    def _listen(self) -> Subscription:
        # Other instances' run events and request changes reach this one as wake-ups:
        # PostgreSQL notifications, or Redis pub/sub with redis_url.
        notes: Subscription
        if self.deployment.redis_url:
            from hookgate.runtime.redis_wakeups import RedisWakeups  # the optional extra

            notes = wakeups = RedisWakeups(self.deployment.redis_url)
            self.db.publisher = wakeups
        else:
            notes = Notifications(self.db.libpq_url)
        followers = Wakers()
        self.runs.bus.followers = followers
        notes.on(RUN_EVENTS_CHANNEL, followers.wake)
        changes = RequestChanges(self.db, self.approvals, self.inbox)
        notes.on(REQUESTS_CHANNEL, changes.received)
        # Before any later notification is handled (PostgreSQL delivers them in commit
        # order): a request made after a revocation finds the revoked token forgotten here.
        notes.on(ACCESS_CHANNEL, lambda _change: self.token_cache.clear())
        self.approvals.on_change(changes.announce)
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
        if self.followup_timers is not None:
            await self.followup_timers.start()
        else:  # jobs queued already are found again by their queueing lock
            await self.followups.reschedule_all()
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
        if self.followup_timers is not None:
            await self.followup_timers.stop()
        await self.runs.stop()
        await self.stop_wakeups()
        await self.approvals.stop()
        await self.channels.aclose()
        await self.db.dispose()
        self.started = False

    async def sync(self) -> None:
        """Write the declared orgs, users and agents into the database, as upserts (any
        number of instances may sync at once).

        An org's ``read_only`` is taken from the declaration only when the org is new: after
        that it is operational state, changed through the API or CLI. Declared users follow
        the declaration, and those it no longer lists are disabled (storage/users.py).
        """
        d = self.deployment
        await sync_orgs(self.db, [(o.id, o.name, o.read_only) for o in d.orgs])
        await sync_declared_users(self.db, d.users)
        rows = [{"id": agent.id, "org_id": agent.org_id, "name": agent.name,
                 "owner_user_id": agent.owner_user_id, "updated_at": utcnow(),
                 "definition": {
                     "instructions": agent.instructions,
                     "tools": [t.name for t in agent.tools],
                     "confirmation_mode": agent.confirmation_mode,
                     "confirmation_approver_scope": agent.confirmation_approver_scope,
                     "require_confirmation_for_all": agent.require_confirmation_for_all,
                     "model_config_json": agent.model_config_json,
                 }} for agent in d.agents.values()]
        async with self.db.transaction() as s:
            await upsert(s, cast(Table, AgentRow.__table__), rows, key=["id"],
                         update=["org_id", "name", "owner_user_id", "definition",
                                 "updated_at"])
        await self.channels.sync(self.db)

    async def authenticate(self, token: str) -> Caller | None:
        """The caller of a token: refused when revoked, expired or the user is disabled."""
        user = await user_for_token(self.db, token)
        if user is None:
            return None
        return Caller(user.id, user.org_id, user.admin, user.name)
