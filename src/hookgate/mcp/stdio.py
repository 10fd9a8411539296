"""``hookgate mcp stdio``: the gateway for one local MCP client over stdin/stdout.

The process shares the server's database: requests it creates show in the inbox of a
``hookgate serve`` on the same database, and decisions made there wake its calls (at once
on PostgreSQL, through its notifications or Redis; the approvals' sweep otherwise). It does not
resume or run agent runs; it only serves this client. Identity is the token in the environment,
checked again every ``server: access_recheck_s`` seconds: once it no longer signs in as the
same user of the same org, the session ends (and so does a call waiting for approval).
"""

from __future__ import annotations

import logging
import uuid

from mcp.server.stdio import stdio_server

from hookgate.config import HookgateConfig
from hookgate.mcp.served import build_mcp_server
from hookgate.mcp.wiring import gateway_for, principal_for
from hookgate.server.access_watch import AccessEnded, while_allowed
from hookgate.server.deployment import deployment_from_config
from hookgate.server.runtime import Runtime

#: Where ``hookgate mcp stdio`` reads the user's API token.
TOKEN_ENV = "HOOKGATE_TOKEN"

log = logging.getLogger(__name__)


class StdioRefusal(Exception):
    """The stdio gateway cannot serve: a missing or unknown token, or an agent without access."""


async def serve_stdio(cfg: HookgateConfig, agent_id: str, token: str | None) -> None:
    """Serve ``agent_id``'s gateway to the client on stdin/stdout until it closes them."""
    if not token:
        raise StdioRefusal(f"set {TOKEN_ENV} to your hookgate API token")
    runtime = Runtime(deployment_from_config(cfg))
    await runtime.db.upgrade()
    try:
        await runtime.sync()
        await runtime.start_wakeups()  # a decision made elsewhere wakes a waiting call
        await runtime.approvals.start()
        caller = await runtime.authenticate(token)
        if caller is None:
            raise StdioRefusal(f"the token in {TOKEN_ENV} is not a hookgate user's token")
        who = principal_for(runtime, agent_id, caller, token,
                            session_id=f"stdio-{uuid.uuid4().hex}")
        if who is None:
            raise StdioRefusal(f"agent '{agent_id}' is not in org '{caller.org_id}' or declares "
                               "no 'mcp:' access")
        recheck_s = runtime.deployment.access_recheck_s
        gateway = gateway_for(runtime, access_recheck_s=recheck_s)
        server = build_mcp_server(gateway, lambda _ctx: who)
        try:
            async with stdio_server() as (read, write):
                try:
                    await while_allowed(
                        server.run(read, write, server.create_initialization_options()),
                        who.still_allowed, recheck_s,
                        on_lost=lambda: gateway.cancel_waits_of(caller.user_id))
                except AccessEnded as ended:
                    log.warning("user %s: %s; the MCP session ends", caller.user_id, ended)
        finally:
            # A client that went away leaves its waiting requests pending: a retry (from
            # this or another process) joins them.
            runtime.approvals.begin_shutdown()
            await gateway.aclose()
    finally:
        await runtime.stop_wakeups()
        await runtime.approvals.stop()
        await runtime.channels.aclose()
        await runtime.db.dispose()
