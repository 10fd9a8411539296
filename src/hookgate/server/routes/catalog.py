"""The hook catalog and the caller's view of the deployment (agents, identity)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from hookgate.catalog.catalog import catalog_entries
from hookgate.server.auth import CallerDep, RuntimeDep
from hookgate.server.responses import AgentEntry, HookEntry, Me

router = APIRouter(prefix="/api", tags=["catalog"])


@router.get("/hooks", response_model=list[HookEntry])
async def hooks(caller: CallerDep) -> list[dict[str, Any]]:
    # The catalog names import targets of the deployment's code: for its users only.
    return [{"name": e.name, "aliases": list(e.aliases), "description": e.description,
             "source": e.source, "target": e.target} for e in catalog_entries()]


@router.get("/me", response_model=Me)
async def me(caller: CallerDep) -> dict[str, Any]:
    return {"user_id": caller.user_id, "org_id": caller.org_id, "admin": caller.admin,
            "name": caller.name}


@router.get("/agents", response_model=list[AgentEntry])
async def agents(caller: CallerDep,
                 rt: RuntimeDep) -> list[dict[str, Any]]:
    broken = rt.deployment.broken_agents
    # ``broken`` and ``error``: an agent served although its hooks or model do not build
    # (``serve --allow-broken-agents``); every run of it ends blocked_build.
    return [
        {"id": a.id, "name": a.name, "tools": [t.name for t in a.tools],
         "confirmation_mode": a.confirmation_mode, "broken": a.id in broken,
         "error": broken.get(a.id)}
        for a in rt.deployment.agents.values() if a.org_id == caller.org_id
    ]
