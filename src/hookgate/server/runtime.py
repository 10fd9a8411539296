"""The server's runtime: the database, the approval service, the runs, the channels —
started and stopped together, with the declared orgs, users and agents synced in.

The executor follows the database: runs advance in this process for a SQLite file, and as
jobs of the run queue for PostgreSQL, where several instances share the work and
notifications carry run events and inbox changes between them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from hookgate.approvals.edits import agent_tool
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.catalog.services import HookServices
from hookgate.claude_code.backend import ClaudeCodeBackend
from hookgate.server.channel_directory import CompletionNotices, ConfiguredChannels
from hookgate.server.deployment import Deployment
from hookgate.server.executors.in_process import InProcessExecutor
from hookgate.server.inbox import REQUESTS_CHANNEL, InboxFeed, RequestChanges
from hookgate.server.notifications import Notifications, Wakers
from hookgate.server.run_manager import RunManager
from hookgate.storage.database import Database
from hookgate.storage.orgs import sync_orgs
from hookgate.storage.run_events import RUN_EVENTS_CHANNEL
from hookgate.storage.tables import AgentRow
from hookgate.storage.users import sync_declared_users, user_for_token

if TYPE_CHECKING:
    from hookgate.server.executors.queue import QueueExecutor

log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class Caller:
    """The authenticated user of an API request."""

    user_id: str
    org_id: str
    admin: bool
    name: str = ""


class Runtime:
    """Everything one server process runs."""

    def __init__(self, deployment: Deployment, *, sweep_interval: float = 2.0,
                 worker: bool = True) -> None:
        self.deployment = deployment
        self.db = Database(deployment.database_url)
        if self.db.is_sqlite and not worker:
            raise ValueError(
                "a SQLite database is served by one instance that runs API and worker "
                "together; splitting the roles needs PostgreSQL (database: postgresql://...)")
        self.channels = ConfiguredChannels(deployment.channels)
        self.approvals = PersistentApprovals(
            self.db, channels=self.channels, inbox_url=self.inbox_url,
            sweep_interval=sweep_interval,
        )
        self.services = HookServices(approvals=self.approvals, database=self.db)
        self.inbox = InboxFeed()
        if deployment.model_for is None:
            raise ValueError("the deployment declares no models")
        # Agents listing channel_notify get one that posts through this server's channels.
        agents = self.channels.with_notify_tool(deployment.agents)
        # An approver's edit is checked against the tool's own schema (approvals/edits.py).
        self.approvals.tool_of = partial(agent_tool, agents)
        self.runs = RunManager(self.db, self.approvals, self.services, agents,
                               deployment.model_for, max_steps=deployment.max_steps,
                               workflows=deployment.workflows)
        #: Answers Claude Code's http hooks (POST /api/claude-code/hooks).
        self.claude_code = ClaudeCodeBackend(self.approvals, self.services, self.runs.ledger)
        self.runs.on_run_end = CompletionNotices(self.channels, agents, self.runs.store,
                                                 self.run_url).run_ended
        self.notifications: Notifications | None = None
        self.queue: QueueExecutor | None = None
        if self.db.is_sqlite:
            self.approvals.on_change(self.inbox.publish)
            self.runs.executor = InProcessExecutor(self.runs)
        else:
            from hookgate.server.executors.queue import QueueExecutor  # only for PostgreSQL

            self.queue = QueueExecutor(self.runs, worker=worker, settings=deployment.worker)
            self.runs.executor = self.queue
            self.notifications = self._listen(self.db.libpq_url)
        self.started = False

    def _listen(self, conninfo: str) -> Notifications:
        # Other instances' run events and request changes reach this one as notifications.
        notes = Notifications(conninfo)
        followers = Wakers()
        self.runs.bus.followers = followers
        notes.on(RUN_EVENTS_CHANNEL, followers.wake)
        changes = RequestChanges(self.db, self.approvals, self.inbox)
        notes.on(REQUESTS_CHANNEL, changes.received)
        self.approvals.on_change(changes.announce)
        return notes

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
        if self.notifications is not None:
            await self.notifications.start()
        await self.approvals.start()
        assert self.runs.executor is not None
        await self.runs.executor.start()
        self.started = True

    async def stop(self) -> None:
        self.approvals.begin_shutdown()
        await self.runs.stop()
        if self.notifications is not None:
            await self.notifications.stop()
        await self.approvals.stop()
        await self.channels.aclose()
        await self.db.dispose()
        self.started = False

    async def sync(self) -> None:
        """Write the declared orgs, users and agents into the database.

        An org's ``read_only`` is taken from the declaration only when the org is new: after
        that it is operational state, changed through the API or CLI. Declared users follow
        the declaration, and those it no longer lists are disabled (storage/users.py).
        """
        d = self.deployment
        await sync_orgs(self.db, [(o.id, o.name, o.read_only) for o in d.orgs])
        await sync_declared_users(self.db, d.users)
        async with self.db.transaction() as s:
            for agent in d.agents.values():
                row_a = await s.get(AgentRow, agent.id)
                definition = {
                    "instructions": agent.instructions,
                    "tools": [t.name for t in agent.tools],
                    "confirmation_mode": agent.confirmation_mode,
                    "confirmation_approver_scope": agent.confirmation_approver_scope,
                    "require_confirmation_for_all": agent.require_confirmation_for_all,
                    "model_config_json": agent.model_config_json,
                }
                if row_a is None:
                    s.add(AgentRow(id=agent.id, org_id=agent.org_id, name=agent.name,
                                   owner_user_id=agent.owner_user_id, definition=definition))
                else:
                    row_a.org_id = agent.org_id
                    row_a.name = agent.name
                    row_a.owner_user_id = agent.owner_user_id
                    row_a.definition = definition
        await self.channels.sync(self.db)

    async def authenticate(self, token: str) -> Caller | None:
        """The caller of a token: refused when revoked, expired or the user is disabled."""
        user = await user_for_token(self.db, token)
        if user is None:
            return None
        return Caller(user.id, user.org_id, user.admin, user.name)
