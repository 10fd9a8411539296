"""``hookgate mcp stdio --in-process``: the gateway for one local MCP client over stdin/stdout,
run in the client's process (the default ``hookgate mcp stdio`` relays to a server instead:
see `hookgate.mcp.relay`).

The process shares the server's database: requests it creates show in the inbox of a
``hookgate serve`` on the same database, and decisions made there wake its calls (at once
on PostgreSQL, through its notifications or Redis; the approvals' sweep otherwise). It does not
resume or run agent runs; it only serves this client. Identity is the token in the environment,
checked again every ``server: access_recheck_s`` seconds: once it no longer signs in as the
same user of the same org, the session ends (and so does a call waiting for approval).

It opens the server's database and its channels' secrets key where it runs: only for
machines trusted with both. Anything that stops it before it serves is a `StdioRefusal`
whose message is one line (an MCP client shows the process's stderr to its user).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.stdio import stdio_server

from hookgate.config import HookgateConfig
from hookgate.mcp.refusal import TOKEN_ENV, StdioRefusal, one_line
from hookgate.mcp.served import build_mcp_server
from hookgate.mcp.session_end import SessionEnd
from hookgate.mcp.wiring import gateway_for, principal_for
from hookgate.runtime.access_watch import AccessEnded, while_allowed
from hookgate.runtime.channel_records import (
    SECRETS_KEY_ENV,
    ChannelSecretsUnreadable,
    SecretsKeyError,
)
from hookgate.runtime.deployment import deployment_from_config
from hookgate.runtime.event_loop import asyncio_named
from hookgate.runtime.runtime import Runtime
from hookgate.storage.database import DatabaseError
from hookgate.storage.database_check import DatabaseUnusable, check_database

log = logging.getLogger(__name__)

__all__ = ["TOKEN_ENV", "StdioRefusal", "one_line", "refusing_on_failure", "serve_stdio"]


@asynccontextmanager
async def refusing_on_failure(cfg: HookgateConfig) -> AsyncIterator[None]:
    """Turn any failure of the start-up inside into a one-line `StdioRefusal`."""
    try:
        yield
    except StdioRefusal:
        raise
    except SecretsKeyError as exc:
        raise StdioRefusal(f"{cfg.source}: channels: {one_line(str(exc))} (stdio mode needs "
                           f"the server's key: put {SECRETS_KEY_ENV} in the MCP client's "
                           "\"env\" for hookgate)") from exc
    except ChannelSecretsUnreadable as exc:
        raise StdioRefusal(f"{cfg.source}: channels: {one_line(str(exc))} (use the "
                           f"server's {SECRETS_KEY_ENV})") from exc
    except (DatabaseUnusable, DatabaseError) as exc:
        raise StdioRefusal(f"{cfg.source}: database: {one_line(str(exc))}") from exc
    except Exception as exc:  # fail closed with one line: nothing is served
        said = one_line(str(exc)) or "no detail"
        raise StdioRefusal(f"cannot start: {type(exc).__name__}: {said}") from exc


async def serve_stdio(cfg: HookgateConfig, agent_id: str, token: str | None) -> None:
    """Serve ``agent_id``'s gateway to the client on stdin/stdout until it closes them."""
    with asyncio_named():
        await _serve_stdio(cfg, agent_id, token)


async def _serve_stdio(cfg: HookgateConfig, agent_id: str, token: str | None) -> None:
    if not token:
        raise StdioRefusal(f"set {TOKEN_ENV} to your hookgate API token")
    async with refusing_on_failure(cfg):
        await check_database(cfg.database)  # reached, and at or behind our migrations
        runtime = Runtime(deployment_from_config(cfg))
    try:
        async with refusing_on_failure(cfg):
            await runtime.db.upgrade()
            await runtime.sync()
            await runtime.start_wakeups()  # a decision made elsewhere wakes a waiting call
            await runtime.approvals.start()
            caller = await runtime.authenticate(token)
            if caller is None:
                raise StdioRefusal(f"the token in {TOKEN_ENV} is not a hookgate user's token")
            who = principal_for(runtime, agent_id, caller, token,
                                session_id=f"stdio-{uuid.uuid4().hex}")
            if who is None:
                raise StdioRefusal(f"agent '{agent_id}' is not in org '{caller.org_id}' or "
                                   "declares no 'mcp:' access")
            recheck_s = runtime.deployment.access_recheck_s
            gateway = gateway_for(runtime, access_recheck_s=recheck_s)
            ended = SessionEnd(who)
            server = build_mcp_server(gateway, lambda _ctx: ended.checked())
            # The client's handshake is answered at once; its servers start meanwhile.
            gateway.warm(who.access.server_ids())
        try:
            async with stdio_server() as (read, write):
                try:
                    await while_allowed(
                        server.run(read, write, server.create_initialization_options()),
                        ended.who.still_allowed, recheck_s,
                        on_lost=lambda: ended.now(gateway.cancel_waits_of(caller.user_id)))
                except AccessEnded as why:
                    log.warning("user %s: %s; the MCP session ends", caller.user_id, why)
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
