"""The gateway of a hookgate runtime: its database, hook services, ledger and inbox links."""

from __future__ import annotations

from functools import partial
from typing import Any

from hookgate.mcp.gateway import McpGateway, Principal
from hookgate.runtime.access_watch import StillAllowed
from hookgate.runtime.auth import still_allowed
from hookgate.runtime.runtime import Caller, Runtime


def gateway_for(runtime: Runtime, **settings: Any) -> McpGateway:
    """A gateway over ``runtime``'s declared MCP servers (settings: see `McpGateway`)."""
    return McpGateway(runtime.deployment.mcp_servers, services=runtime.services,
                      db=runtime.db, ledger=runtime.runs.ledger,
                      inbox_url=runtime.inbox_url, **settings)


def principal_for(runtime: Runtime, agent_id: str, caller: Caller, token: str,
                  session_id: str | None = None,
                  allowed: StillAllowed | None = None) -> Principal | None:
    """``caller`` (signed in with ``token``) acting through ``agent_id``; None unless the
    agent is in the caller's org and declares ``mcp:`` access (the same answer for "no such
    agent": nothing leaks). Its calls re-check the token while they wait (``allowed``: how,
    for a token that is not a hookgate API token)."""
    deployment = runtime.deployment
    agent = deployment.agents.get(agent_id)
    access = deployment.mcp_access.get(agent_id)
    if agent is None or access is None or agent.org_id != caller.org_id:
        return None
    return Principal(agent, access, caller.user_id, caller.org_id, session_id,
                     still_allowed=allowed or partial(still_allowed, runtime, token, caller))
