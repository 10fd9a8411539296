"""Users over HTTP for org admins: who has access, and revoking a token for good."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from hookgate.runtime.auth import token_cache
from hookgate.runtime.runtime import Caller
from hookgate.server.auth import CallerDep, RuntimeDep
from hookgate.server.responses import Revoked, UserEntry
from hookgate.storage.users import UnknownUser, revoke_token, users_of_org

router = APIRouter(prefix="/api", tags=["users"])


def _admin(caller: Caller) -> None:
    if not caller.admin:
        raise HTTPException(403, f"only an admin of org '{caller.org_id}' may manage users")


@router.get("/users", response_model=list[UserEntry])
async def list_users(caller: CallerDep, rt: RuntimeDep) -> list[dict[str, Any]]:
    """The caller's org's users (admins only); tokens and their digests are never shown."""
    _admin(caller)
    return [{"id": u.id, "admin": u.admin, "disabled": u.disabled, "declared": u.declared,
             "has_token": u.has_token,
             "token_expires_at": u.token_expires_at.isoformat() if u.token_expires_at
             else None}
            for u in await users_of_org(rt.db, caller.org_id)]


@router.post("/users/{user_id}/revoke", response_model=Revoked)
async def revoke(user_id: str, caller: CallerDep, rt: RuntimeDep) -> dict[str, Any]:
    """Revoke the user's token for good (admins of the user's org only)."""
    _admin(caller)
    try:
        had = await revoke_token(rt.db, user_id, org_id=caller.org_id, by=caller.user_id)
    except UnknownUser:
        raise HTTPException(404, f"no user '{user_id}'") from None  # other orgs stay unseen
    token_cache(rt).clear()  # at once in this process; other processes within the cache's TTL
    return {"user_id": user_id, "revoked": had}
