"""An org's read-only flag over HTTP: any member may read it, an org admin may set it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from hookgate.runtime.runtime import Caller
from hookgate.server.auth import CallerDep, RuntimeDep
from hookgate.server.responses import OrgReadOnly
from hookgate.server.schemas import ApiBody
from hookgate.storage.orgs import UnknownOrg, org_read_only, set_org_read_only

router = APIRouter(prefix="/api", tags=["orgs"])


class ReadOnly(ApiBody):
    read_only: bool


def _own_org(org_id: str, caller: Caller) -> None:
    # Another org is not even shown to exist.
    if org_id != caller.org_id:
        raise HTTPException(404, f"no org '{org_id}'")


@router.get("/orgs/{org_id}/read_only", response_model=OrgReadOnly)
async def get_read_only(org_id: str, caller: CallerDep, rt: RuntimeDep) -> dict[str, Any]:
    _own_org(org_id, caller)
    flag = await org_read_only(rt.db, org_id)
    if flag is None:
        raise HTTPException(404, f"no org '{org_id}'")
    return {"org_id": org_id, "read_only": flag}


@router.put("/orgs/{org_id}/read_only", response_model=OrgReadOnly)
async def put_read_only(org_id: str, body: ReadOnly, caller: CallerDep,
                        rt: RuntimeDep) -> dict[str, Any]:
    """Set the flag (org admins only); it holds from the next tool call on."""
    _own_org(org_id, caller)
    if not caller.admin:
        raise HTTPException(403, f"only an admin of org '{org_id}' may change read-only mode")
    try:
        await set_org_read_only(rt.db, org_id, body.read_only)
    except UnknownOrg as exc:
        raise HTTPException(404, str(exc)) from None
    return {"org_id": org_id, "read_only": body.read_only}
