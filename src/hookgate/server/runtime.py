"""The server's runtime: the database, the approval service, the runs, the channels —
started and stopped together, with the declared orgs, users and agents synced in."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hookgate.approvals.persistent import PersistentApprovals
from hookgate.catalog.services import HookServices
from hookgate.claude_code.backend import ClaudeCodeBackend
from hookgate.server.channel_directory import CompletionNotices, ConfiguredChannels
from hookgate.server.deployment import Deployment
from hookgate.server.inbox import InboxFeed
from hookgate.server.run_manager import RunManager
from hookgate.storage.database import Database
from hookgate.storage.orgs import sync_orgs
from hookgate.storage.tables import AgentRow
from hookgate.storage.users import sync_declared_users, user_for_token

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

    def __init__(self, deployment: Deployment, *, sweep_interval: float = 2.0) -> None:
        self.deployment = deployment
        self.db = Database(deployment.database_url)
        self.channels = ConfiguredChannels(deployment.channels)
        self.approvals = PersistentApprovals(
            self.db, channels=self.channels, inbox_url=self.inbox_url,
            sweep_interval=sweep_interval,
        )
        self.services = HookServices(approvals=self.approvals, database=self.db)
        self.inbox = InboxFeed()
        self.approvals.on_change(self.inbox.publish)
        if deployment.model_for is None:
            raise ValueError("the deployment declares no models")
        # Agents listing channel_notify get one that posts through this server's channels.
        agents = self.channels.with_notify_tool(deployment.agents)
        self.runs = RunManager(self.db, self.approvals, self.services, agents,
                               deployment.model_for, max_steps=deployment.max_steps,
                               workflows=deployment.workflows)
        #: Answers Claude Code's http hooks (POST /api/claude-code/hooks).
        self.claude_code = ClaudeCodeBackend(self.approvals, self.services, self.runs.ledger)
        self.runs.on_run_end = CompletionNotices(self.channels, agents, self.runs.store,
                                                 self.run_url).run_ended
        self.started = False

    def inbox_url(self, request_id: str) -> str | None:
        return self._portal_link(f"confirmations/{request_id}")

    def run_url(self, run_id: str) -> str | None:
        return self._portal_link(f"runs/{run_id}")

    def _portal_link(self, route: str) -> str | None:
        base = self.deployment.public_url
        return f"{base.rstrip('/')}/#/{route}" if base else None

    async def start(self) -> None:
        await self.db.upgrade()
        await self.sync()
        await self.approvals.start()
        resumed = await self.runs.resume_all()
        if resumed:
            log.info("resumed %d run(s) that were in flight", resumed)
        self.started = True

    async def stop(self) -> None:
        self.approvals.begin_shutdown()
        await self.runs.stop()
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
