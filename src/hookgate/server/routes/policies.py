"""The Cedar policy sets in force over HTTP (org admins only): for each set the caller's
org's agents use, its live version, the state of its files and the last load error."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel

from hookgate.server.auth import CallerDep, RuntimeDep

router = APIRouter(prefix="/api", tags=["policies"])


class PolicySetStatus(BaseModel):
    """One policy set as this server holds it."""

    path: str
    default: str
    #: The live set's version (None: the files were never loaded here).
    version: str | None
    loaded_at: str | None
    #: ``in force``, ``not reloaded``, ``reload failed`` or ``unreadable``.
    state: str
    files_version: str | None
    stamped_version: str | None
    #: Why the files are not in force (None when they are).
    error: str | None
    agents: list[str]


class ModesStatus(BaseModel):
    """The ``mode:`` of the configuration's entries in force here (policies/modes.py)."""

    config: str
    version: str
    #: ``as started``, ``in force``, ``needs restart`` or ``reload failed``.
    state: str
    error: str | None


class PolicyStatusAnswer(BaseModel):
    sets: list[PolicySetStatus]
    modes: ModesStatus | None = None


@router.get("/policies/status", response_model=PolicyStatusAnswer)
def policies_status(caller: CallerDep, rt: RuntimeDep) -> dict[str, Any]:
    """``{"sets": [{path, default, version, loaded_at, state, files_version,
    stamped_version, error, agents}], "modes": {config, version, state, error}}``;
    ``error`` says why the files (or stamped modes) are not in force.
    (It reads the files, so it runs on a worker thread.)"""
    if not caller.admin:
        raise HTTPException(403, "only an org admin may read the policy sets' status")
    from hookgate.agent import hook_declaration
    from hookgate.policies.modes import modes_in_force

    live_modes = modes_in_force()
    modes = None if live_modes is None else live_modes.status()
    if not any(_declares_policies(hook_declaration(a)) for a in rt.deployment.agents.values()
               if a.org_id == caller.org_id):
        return {"sets": [], "modes": modes}
    # Cedar's bindings are an extra: imported only where an agent declares policies.
    from hookgate.catalog.builtin.cedar_policy import policy_params
    from hookgate.policies import PolicyLoadError, open_policy_set

    sets: dict[tuple[str, str], dict[str, Any]] = {}
    for agent in rt.deployment.agents.values():
        params = policy_params(agent)
        if agent.org_id != caller.org_id or params is None:
            continue
        path, default = str(params.get("policies")), str(params.get("default"))
        key = (str(Path(path).resolve()), default)
        if key not in sets:
            try:
                live = open_policy_set(Path(path), default,  # type: ignore[arg-type]
                                       agent.tools, declared_tools=not agent.tools)
                sets[key] = {**live.status().as_dict(), "agents": []}
            except PolicyLoadError as exc:
                sets[key] = {"path": key[0], "default": default, "version": None,
                             "loaded_at": None, "state": "unreadable", "files_version": None,
                             "stamped_version": None, "error": " | ".join(exc.problems),
                             "agents": []}
        sets[key]["agents"].append(agent.id)
    return {"sets": list(sets.values()), "modes": modes}


def _declares_policies(declared: Mapping[str, Any]) -> bool:
    return any(isinstance(e, dict) and e.get("name") == "cedar_policy"
               for e in declared.get("class_hooks") or ())
