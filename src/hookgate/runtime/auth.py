"""Who a bearer token signs in as, and whether that still holds: the one answer to "may this
caller still see it" for every interface (HTTP routes, event streams, MCP sessions, an MCP call
waiting for approval). A valid token's user is remembered for two seconds (runtime/token_cache.py).
"""

from __future__ import annotations

import logging

from hookgate.runtime.runtime import Caller, Runtime
from hookgate.runtime.token_cache import TokenCache, token_key

log = logging.getLogger(__name__)


def token_cache(runtime: Runtime) -> TokenCache[Caller]:
    """The runtime's memory of recent token lookups."""
    return runtime.token_cache


async def caller_for_token(runtime: Runtime, token: str, key: str | None = None
                           ) -> Caller | None:
    """The user ``token`` signs in as now (None when revoked, expired, or the user is disabled
    or no longer declared), through the runtime's token cache (``key``: the token's
    `token_key`, when the caller has made it already)."""
    return await token_cache(runtime).lookup(token, runtime.authenticate, key)


async def still_allowed(runtime: Runtime, token: str, caller: Caller,
                        key: str | None = None) -> bool:
    """Whether ``token`` still signs in as ``caller``: the same user, in the same org, with
    no right lost (an admin made a plain member no longer sees what admins see).

    The token cache's fresh answer is read directly when it has one (``key``: the token's
    `token_key`, for a caller that asks often, such as a stream before each event).
    A lookup that fails (the database unreachable) answers False: a connection that cannot
    show its caller still has access ends, and its client reconnects through the routes'
    own check.
    """
    now = token_cache(runtime).fresh(token_key(token) if key is None else key)
    if now is None:
        try:
            now = await caller_for_token(runtime, token)
        except Exception as exc:  # fail closed: which error does not change the answer
            log.warning("re-checking user %s's access failed, ending the connection: %s",
                        caller.user_id, exc)
            return False
    return now is not None and same_access(now, caller)


def same_access(now: Caller, caller: Caller) -> bool:
    """Whether ``now`` (whom a token signs in as now) may still use what ``caller`` opened:
    the same user, in the same org, with no right lost."""
    return (now.user_id == caller.user_id and now.org_id == caller.org_id
            and (now.admin or not caller.admin))
