"""Routers beyond the core API, added by their own modules (one line each)."""

from __future__ import annotations

import importlib

from fastapi import APIRouter

#: Modules under hookgate.server.routes that expose ``router``.
EXTRA_ROUTE_MODULES: tuple[str, ...] = ("workflows", "channel_callbacks", "audit", "orgs",
                                         "users", "claude_code", "batch_decisions",
                                         "approval_rules", "guarded_calls", "policies",
                                         "coding_agents",
                                         "health")


def routers() -> list[APIRouter]:
    out = []
    for name in EXTRA_ROUTE_MODULES:
        module = importlib.import_module(f"hookgate.server.routes.{name}")
        out.append(module.router)
    return out
