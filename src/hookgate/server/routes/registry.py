"""Routers beyond the core API, added by their own modules (one line each)."""

from __future__ import annotations

import importlib

from fastapi import APIRouter

#: Modules under hookgate.server.routes that expose ``router``.
EXTRA_ROUTE_MODULES: tuple[str, ...] = ("workflows", "channel_callbacks", "audit", "orgs",
                                         "users", "claude_code", "batch_decisions",
                                         "approval_rules", "policies",
                                         "coding_agents",
                                         "health")


#: Modules whose routes are tried before every other router: the guarded-call API's ask and
#: report come on every tool call of every outside agent, and routing tries the routers in
#: order (about 65 µs per request when they came last; decision record 0017). Their paths
#: match no other route's (tests/api_v1/test_route_order.py).
HOT_ROUTE_MODULES: tuple[str, ...] = ("guarded_calls",)


def routers(modules: tuple[str, ...] = EXTRA_ROUTE_MODULES) -> list[APIRouter]:
    out = []
    for name in modules:
        module = importlib.import_module(f"hookgate.server.routes.{name}")
        out.append(module.router)
    return out
