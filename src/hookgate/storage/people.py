"""People as the approval checks read them now: the current user record of each id (org,
admin, disabled), the enabled members of an org, and a chat identity's user. Every check of
who may decide reads them here at the moment of use (approvals/authority.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import InstrumentedAttribute

from hookgate.storage.database import Database
from hookgate.storage.tables import User
from hookgate.storage.transaction import SessionTransaction

#: The users column holding each platform's identity of a person (``users[].chat``).
IDENTITY_COLUMNS: dict[str, InstrumentedAttribute[str | None]] = {
    "feishu": User.feishu_open_id,
    "slack": User.slack_user_id,
    "wecom": User.wecom_userid,
    "telegram": User.telegram_user_id,
    "teams": User.teams_aad_object_id,
    "discord": User.discord_user_id,
    "email": User.email_address,
    "ntfy": User.ntfy_topic,
}


@dataclass(frozen=True, slots=True)
class PersonRecord:
    """One user's record as it is now."""

    id: str
    org_id: str
    admin: bool
    disabled: bool
    #: A service (agent) identity: acts for people, never decides.
    service: bool = False


def _record(user: User) -> PersonRecord:
    return PersonRecord(user.id, user.org_id, bool(user.admin), bool(user.disabled),
                        bool(user.service))


async def read_people(tx: SessionTransaction, user_ids: Iterable[str]) -> dict[str, PersonRecord]:
    """The current records of ``user_ids`` (those that exist), read in ``tx``."""
    ids = sorted({u for u in user_ids if u})
    if not ids:
        return {}
    rows = (await tx.execute(select(User).where(User.id.in_(ids)))).scalars().all()
    return {u.id: _record(u) for u in rows}


async def people(db: Database, user_ids: Iterable[str]) -> dict[str, PersonRecord]:
    """`read_people` in a read of its own (one person: one statement on the backend's fast
    path, the read every ask makes of who is asking)."""
    ids = list({u for u in user_ids if u})
    if not ids:
        return {}
    if len(ids) == 1:
        row = await db.backend.person(ids[0])
        return {} if row is None else {
            row.id: PersonRecord(row.id, row.org_id, row.admin, row.disabled, row.service)}
    async with db.session() as s:
        return await read_people(s, ids)


async def enabled_users(db: Database, org_id: str | None, *, admins_only: bool = False
                        ) -> list[str]:
    """The ids of ``org_id``'s enabled people (only its admins with ``admins_only``): no
    service identity, which never decides."""
    q = select(User.id).where(User.org_id == org_id, User.disabled.is_(False),
                              User.service.is_(False))
    if admins_only:
        q = q.where(User.admin.is_(True))
    async with db.session() as s:
        return list((await s.execute(q.order_by(User.id))).scalars().all())


async def user_states(db: Database, user_ids: list[str]) -> dict[str, bool]:
    """``{user id: disabled}`` for the users the database knows."""
    if not user_ids:
        return {}
    async with db.session() as s:
        rows = (await s.execute(select(User.id, User.disabled)
                                .where(User.id.in_(user_ids)))).all()
    return {r[0]: bool(r[1]) for r in rows}


async def any_users(db: Database) -> bool:
    """Whether the users table is in use (a server); the library runs without it."""
    async with db.session() as s:
        return bool((await s.execute(select(func.count()).select_from(User))).scalar_one())


def knows_chat(platform: str) -> bool:
    """Whether user records carry identities of ``platform`` (``users[].chat``)."""
    return platform in IDENTITY_COLUMNS


async def users_by_chat(db: Database, platform: str, identity: str, org_id: str
                        ) -> list[PersonRecord]:
    """The users of ``org_id`` whose ``platform`` identity is ``identity`` (at most two:
    one is an answer, two is ambiguity)."""
    column = IDENTITY_COLUMNS[platform]
    async with db.session() as s:
        rows = (await s.execute(select(User).where(column == identity, User.org_id == org_id)
                                .limit(2))).scalars().all()
    return [_record(u) for u in rows]
