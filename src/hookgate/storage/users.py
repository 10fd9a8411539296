"""Users as the database holds them: who may sign in, and how access ends.

The configuration file is the source of truth for the users it declares: a user it no
longer lists is disabled, and a declared user's token is the file's (none when the file
gives none). A revoked token's digest is kept in ``revoked_tokens``, so neither a sync nor a
restart brings it back; a token past ``token_expires_at`` no longer signs in.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from sqlalchemy import Table, select, update

from hookgate.storage.backends.base import UserRow
from hookgate.storage.database import Database
from hookgate.storage.tables import ApprovalRuleRow, RevokedToken, User
from hookgate.storage.types import utcnow
from hookgate.storage.upserts import upsert

log = logging.getLogger(__name__)


def token_digest(token: str) -> str:
    """sha256 hex of an API token; only this is stored."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class UnknownUser(LookupError):
    """No user with that id (in that org)."""


@dataclass(slots=True)
class DeclaredUser:
    """A user as a declaration (the configuration file, the demo) gives it."""

    id: str
    org: str
    admin: bool = False
    token_sha256: str | None = None
    name: str = ""
    feishu_open_id: str | None = None
    slack_user_id: str | None = None
    wecom_userid: str | None = None
    telegram_user_id: str | None = None
    teams_aad_object_id: str | None = None
    discord_user_id: str | None = None
    email_address: str | None = None
    ntfy_topic: str | None = None
    token_expires_at: datetime | None = None
    #: A service (agent) identity (``kind: service``): acts for people, never decides.
    service: bool = False


@dataclass(slots=True, frozen=True)
class UserStatus:
    """What an admin sees of a user: never the token or its digest."""

    id: str
    org_id: str
    admin: bool
    disabled: bool
    declared: bool
    has_token: bool
    token_expires_at: datetime | None


#: NOTIFY channel for a change of who may sign in (a token revoked, users synced): every
#: instance forgets its remembered token lookups (runtime/token_cache.py) at once.
ACCESS_CHANNEL = "hookgate_access"


async def sync_declared_users(db: Database, users: Iterable[DeclaredUser]) -> None:
    """Write the declared users and disable the previously declared ones now missing.

    Users created with ``hookgate users create`` (not declared) are left as they are.
    """
    declared = list(users)
    async with db.transaction() as s:
        revoked = set((await s.execute(select(RevokedToken.token_sha256))).scalars())
        rows = []
        for u in declared:
            token = u.token_sha256
            if token is not None and token in revoked:
                log.warning("user %s: the configuration still gives a revoked token; it "
                            "is not accepted (give the user a new one)", u.id)
                token = None
            rows.append({
                "id": u.id, "org_id": u.org, "name": u.name, "admin": u.admin,
                "declared": True, "disabled": False, "token_sha256": token,
                "token_expires_at": u.token_expires_at, "feishu_open_id": u.feishu_open_id,
                "slack_user_id": u.slack_user_id, "wecom_userid": u.wecom_userid,
                "telegram_user_id": u.telegram_user_id,
                "teams_aad_object_id": u.teams_aad_object_id,
                "discord_user_id": u.discord_user_id,
                "email_address": u.email_address, "ntfy_topic": u.ntfy_topic,
                "service": u.service, "created_at": utcnow()})
        await upsert(s, cast(Table, User.__table__), rows, key=["id"],
                     update=[k for k in rows[0] if k not in ("id", "created_at")]
                     if rows else [])
        ids = [u.id for u in declared]
        await s.execute(
            update(User).where(User.declared.is_(True), User.id.not_in(ids))
            .values(disabled=True, token_sha256=None))
        await db.notify(s, ACCESS_CHANNEL, "sync")


async def user_for_token(db: Database, token: str) -> UserRow | None:
    """The active user whose unexpired, unrevoked token this is, read now (one statement
    on the backend's fast path: every request and every moment of use asks)."""
    if not token:
        return None
    found = await db.backend.token_user(token_digest(token))
    if found is None:
        return None
    user, revoked = found
    if revoked or user.disabled:
        return None
    if user.token_expires_at is not None and user.token_expires_at <= utcnow():
        return None
    return user


async def revoke_token(db: Database, user_id: str, *, org_id: str | None = None,
                       by: str | None = None) -> bool:
    """Revoke the user's token for good, and suspend the standing rules they created (until
    an admin enables them again); False when they had no token. UnknownUser when there is
    no such user (in ``org_id``, when given)."""
    async with db.transaction() as s:
        user = await s.get(User, user_id, with_for_update=True)
        if user is None or (org_id is not None and user.org_id != org_id):
            raise UnknownUser(f"no user '{user_id}'"
                              + (f" in org '{org_id}'" if org_id is not None else ""))
        digest = user.token_sha256
        if digest is None:
            return False
        if await s.get(RevokedToken, digest) is None:
            s.add(RevokedToken(token_sha256=digest, user_id=user_id, revoked_by=by))
        user.token_sha256 = None
        user.token_expires_at = None
        # A rule is that person's decision made in advance: it does not outlive their access.
        await s.execute(
            update(ApprovalRuleRow)
            .where(ApprovalRuleRow.created_by == user_id, ApprovalRuleRow.revoked_at.is_(None),
                   ApprovalRuleRow.suspended_at.is_(None))
            .values(suspended_at=utcnow(),
                    suspended_reason=f"the token of its creator '{user_id}' was revoked"
                    + (f" by {by}" if by else "")))
        await db.notify(s, ACCESS_CHANNEL, user_id)
    return True


async def users_of_org(db: Database, org_id: str) -> list[UserStatus]:
    async with db.session() as s:
        rows = (await s.execute(
            select(User).where(User.org_id == org_id).order_by(User.id))).scalars().all()
    return [UserStatus(u.id, u.org_id, u.admin, u.disabled, u.declared,
                       u.token_sha256 is not None, u.token_expires_at) for u in rows]


async def user_admin(db: Database, user_id: str) -> bool | None:
    """Whether the user is an admin of their org now; None for an unknown or disabled user."""
    async with db.session() as s:
        user = await s.get(User, user_id)
    if user is None or user.disabled:
        return None
    return bool(user.admin)
