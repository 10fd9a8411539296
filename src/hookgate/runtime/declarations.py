"""Writing a deployment's declared orgs, users and agents into its database: what `serve`
does at start and every command that runs agents (`run`, `eval`, `workflow run`) does too,
so that hooks reading the callers' facts (``cedar_policy``) find the same principals."""

from __future__ import annotations

from hookgate.runtime.deployment import Deployment
from hookgate.storage.agents import DeclaredAgent, sync_agents
from hookgate.storage.database import Database
from hookgate.storage.orgs import sync_orgs
from hookgate.storage.users import sync_declared_users


async def write_declarations(db: Database, d: Deployment) -> None:
    """Upsert the declared orgs, users and agents (any number of processes may at once).

    An org's ``read_only`` is taken from the declaration only when the org is new: after
    that it is operational state, changed through the API or CLI. Declared users follow
    the declaration, and those it no longer lists are disabled (storage/users.py).
    """
    await sync_orgs(db, [(o.id, o.name, o.read_only) for o in d.orgs])
    await sync_declared_users(db, d.users)
    await sync_agents(db, [DeclaredAgent(
        agent.id, agent.org_id, agent.name, agent.owner_user_id, {
            "instructions": agent.instructions,
            "tools": [t.name for t in agent.tools],
            "confirmation_mode": agent.confirmation_mode,
            "confirmation_approver_scope": agent.confirmation_approver_scope,
            "require_confirmation_for_all": agent.require_confirmation_for_all,
            "model_config_json": agent.model_config_json,
        }) for agent in d.agents.values()])
