"""People signed in through an OpenID Connect provider, as the database holds them: sign-ins
under way (state, nonce, PKCE verifier, each taken once), the user each ``iss`` + ``sub`` is,
and sessions with the time the provider last confirmed them, shared by every instance.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, or_, select, update

from hookgate.storage.database import Database
from hookgate.storage.tables import OidcIdentity, OidcLogin, OidcSession, Org, User
from hookgate.storage.transaction import SessionTransaction
from hookgate.storage.types import utcnow
from hookgate.storage.users import ACCESS_CHANNEL

#: How long a sign-in may take between the redirect to the provider and its callback.
LOGIN_TTL = timedelta(minutes=10)
#: Session ids start with this, so a session id sent as a bearer token is told from an API token.
SESSION_PREFIX = "hgs_"


class UnknownOrg(LookupError):
    """The org the provider's claims name is not one this server serves."""


def session_digest(session_id: str) -> str:
    """sha256 hex of a session id; only this is stored."""
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class PendingLogin:
    state: str
    nonce: str
    code_verifier: str
    return_to: str
    #: sha256 of the secret held by whoever started the sign-in (see `session_digest`).
    binding_sha256: str


@dataclass(frozen=True, slots=True)
class Person:
    """What the provider's claims say of a person, mapped to hookgate's terms."""

    issuer: str
    subject: str
    org_id: str
    admin: bool
    groups: tuple[str, ...]
    name: str = ""
    email: str | None = None


@dataclass(frozen=True, slots=True)
class SignedIn:
    """An open session as it is now, with its user's current record."""

    id_sha256: str
    user_id: str
    org_id: str
    admin: bool
    name: str
    service: bool
    issuer: str
    subject: str
    kind: str
    csrf_token: str
    #: The provider's refresh token as stored: sealed (server/oidc/sealing.py), never clear.
    refresh_token: str | None
    checked_at: datetime


async def save_login(db: Database, login: PendingLogin) -> None:
    """Keep ``login`` until its callback; sign-ins older than LOGIN_TTL are deleted."""
    async with db.transaction() as s:
        await s.execute(delete(OidcLogin).where(OidcLogin.created_at < utcnow() - LOGIN_TTL))
        s.add(OidcLogin(state=login.state, nonce=login.nonce,
                        code_verifier=login.code_verifier, return_to=login.return_to,
                        binding_sha256=login.binding_sha256))


async def take_login(db: Database, state: str) -> PendingLogin | None:
    """The sign-in ``state`` started, deleted in the same transaction: a replayed callback
    (the same state, so the same nonce) finds nothing. None when unknown or too old."""
    async with db.transaction() as s:
        row = await s.get(OidcLogin, state, with_for_update=True)
        if row is None:
            return None
        await s.delete(row)
        if row.created_at < utcnow() - LOGIN_TTL:
            return None
        return PendingLogin(row.state, row.nonce, row.code_verifier, row.return_to,
                            row.binding_sha256)


def _user_id(issuer: str, subject: str) -> str:
    digest = hashlib.sha256(f"{issuer}\x00{subject}".encode()).hexdigest()
    return f"oidc-{digest[:24]}"


async def record_person(db: Database, person: Person) -> str:
    """The hookgate user of ``person`` (found by issuer and subject, created on first
    sign-in), with org, admin right, name and groups as the provider says now. UnknownOrg
    when the org is not served. A user an admin disabled stays disabled."""
    async with db.transaction() as s:
        if await s.get(Org, person.org_id) is None:
            raise UnknownOrg(f"the identity provider puts '{person.subject}' in org "
                             f"'{person.org_id}', which this server does not serve")
        identity = await s.get(OidcIdentity, (person.issuer, person.subject),
                               with_for_update=True)
        name = person.name or person.email or person.subject
        if identity is None:
            user_id = _user_id(person.issuer, person.subject)
            user = await s.get(User, user_id)
            if user is None:
                s.add(User(id=user_id, org_id=person.org_id, name=name[:256],
                           admin=person.admin, declared=False, disabled=False))
                await s.flush()
            s.add(OidcIdentity(issuer=person.issuer, subject=person.subject, user_id=user_id,
                               email=person.email, groups=list(person.groups)))
        else:
            user_id = identity.user_id
            identity.email = person.email
            identity.groups = list(person.groups)
            identity.updated_at = utcnow()
        values: dict[str, object] = {"org_id": person.org_id, "admin": person.admin,
                                     "name": name[:256]}
        if identity is not None and identity.refused_at is not None:
            # The provider refused them before and confirms them now: enabled again.
            identity.refused_at = None
            values["disabled"] = False
        await s.execute(update(User).where(User.id == user_id).values(**values))
        await db.notify(s, ACCESS_CHANNEL, user_id)
    return user_id


async def open_session(db: Database, person: Person, user_id: str, *, kind: str,
                       refresh_token: str | None, ttl_s: float) -> tuple[str, str]:
    """A new session of ``user_id``: its id (returned once, stored as a digest) and its
    CSRF token. ``refresh_token``: the provider's, already sealed. Sessions that ended or
    expired are deleted in the same transaction."""
    session_id = SESSION_PREFIX + secrets.token_urlsafe(32)
    csrf = secrets.token_urlsafe(32)
    now = utcnow()
    async with db.transaction() as s:
        # Rows of sessions that ended or expired are of no further use: gone at each sign-in.
        await s.execute(delete(OidcSession).where(
            or_(OidcSession.ended_at.is_not(None), OidcSession.expires_at <= now)))
        s.add(OidcSession(id_sha256=session_digest(session_id), user_id=user_id,
                          issuer=person.issuer, subject=person.subject, kind=kind,
                          csrf_token=csrf, refresh_token=refresh_token, created_at=now,
                          expires_at=now + timedelta(seconds=ttl_s), checked_at=now))
    return session_id, csrf


async def signed_in(db: Database, session_id: str) -> SignedIn | None:
    """The open session ``session_id`` names, read now: None when unknown, ended,
    expired, or its user disabled."""
    async with db.session() as s:
        row = (await s.execute(
            select(OidcSession, User).join(User, User.id == OidcSession.user_id)
            .where(OidcSession.id_sha256 == session_digest(session_id)))).first()
    if row is None:
        return None
    session, user = row
    if session.ended_at is not None or session.expires_at <= utcnow() or user.disabled:
        return None
    return SignedIn(session.id_sha256, user.id, user.org_id, bool(user.admin), user.name,
                    bool(user.service), session.issuer, session.subject, session.kind,
                    session.csrf_token, session.refresh_token, session.checked_at)


async def claim_recheck(db: Database, id_sha256: str, recheck_s: float) -> bool:
    """Whether this instance re-checks the session at the provider now: True for exactly
    one of the instances that find it last checked more than ``recheck_s`` ago."""
    now = utcnow()
    async with db.transaction() as s:
        done = await s.execute(
            update(OidcSession).where(OidcSession.id_sha256 == id_sha256,
                                      OidcSession.checked_at <= now - timedelta(seconds=recheck_s),
                                      OidcSession.ended_at.is_(None))
            .values(checked_at=now))
    return bool(getattr(done, "rowcount", 0) == 1)


async def confirmed(db: Database, id_sha256: str, refresh_token: str | None) -> None:
    """The provider confirmed the session now (``refresh_token``: the one it gave, if new,
    sealed)."""
    values: dict[str, object] = {"checked_at": utcnow()}
    if refresh_token is not None:
        values["refresh_token"] = refresh_token
    async with db.transaction() as s:
        await s.execute(update(OidcSession).where(OidcSession.id_sha256 == id_sha256)
                        .values(**values))


async def end_session(db: Database, id_sha256: str, reason: str) -> None:
    async with db.transaction() as s:
        await s.execute(update(OidcSession).where(OidcSession.id_sha256 == id_sha256,
                                                  OidcSession.ended_at.is_(None))
                        .values(ended_at=utcnow(), ended_reason=reason[:512],
                                refresh_token=None))


async def end_sessions_of(db: Database, issuer: str, subject: str, reason: str) -> int:
    """End every session of the person ``issuer`` + ``subject`` (a provider's logout or a
    refused refresh); how many were open."""
    async with db.transaction() as s:
        done = await s.execute(update(OidcSession).where(
            OidcSession.issuer == issuer, OidcSession.subject == subject,
            OidcSession.ended_at.is_(None))
            .values(ended_at=utcnow(), ended_reason=reason[:512], refresh_token=None))
    return int(getattr(done, "rowcount", 0) or 0)


async def refuse_person(db: Database, issuer: str, subject: str, reason: str) -> int:
    """The provider no longer confirms the person: every session of theirs ends and their
    user is disabled, so no decision, vote or standing rule of theirs counts anywhere
    (approvals/authority.py reads the record at the moment of use) until they sign in
    again; how many sessions were open."""
    async with db.transaction() as s:
        done = await s.execute(update(OidcSession).where(
            OidcSession.issuer == issuer, OidcSession.subject == subject,
            OidcSession.ended_at.is_(None))
            .values(ended_at=utcnow(), ended_reason=reason[:512], refresh_token=None))
        identity = await s.get(OidcIdentity, (issuer, subject), with_for_update=True)
        if identity is not None:
            identity.refused_at = utcnow()
            await s.execute(update(User).where(User.id == identity.user_id)
                            .values(disabled=True))
            await db.notify(s, ACCESS_CHANNEL, identity.user_id)
    return int(getattr(done, "rowcount", 0) or 0)


async def identity_of(db: Database, user_id: str) -> tuple[str, str] | None:
    """The (issuer, subject) a user signs in as through a provider; None for others."""
    async with db.session() as s:
        row = (await s.execute(select(OidcIdentity.issuer, OidcIdentity.subject)
                               .where(OidcIdentity.user_id == user_id))).first()
    return None if row is None else (row[0], row[1])


async def groups_of(db: Database, user_id: str) -> tuple[str, ...] | None:
    """The groups the provider said ``user_id`` is in at their last sign-in or re-check; None
    when they have no provider identity (an API token's person), so are in no group."""
    async with db.session() as s:
        row = (await s.execute(select(OidcIdentity.groups)
                               .where(OidcIdentity.user_id == user_id))).first()
    return None if row is None else tuple(str(g) for g in (row[0] or ()))


async def reseal_refresh_tokens(db: Database, reseal: Callable[[str], str]) -> int:
    """Every open session's sealed refresh token sealed again by ``reseal`` (key rotation),
    all or nothing; how many."""
    async with db.transaction() as s:
        rows = (await s.execute(select(OidcSession.id_sha256, OidcSession.refresh_token)
                                .where(OidcSession.refresh_token.is_not(None))
                                .with_for_update())).all()
        for id_sha256, sealed in rows:
            if sealed is None:
                continue
            await s.execute(update(OidcSession).where(OidcSession.id_sha256 == id_sha256)
                            .values(refresh_token=reseal(sealed)))
    return len(rows)


async def read_groups(tx: SessionTransaction, user_ids: Iterable[str]
                      ) -> dict[str, tuple[str, ...]]:
    """`groups_of` for several people, read in ``tx`` (those without a provider identity
    are absent)."""
    ids = sorted({u for u in user_ids if u})
    if not ids:
        return {}
    rows = (await tx.execute(select(OidcIdentity.user_id, OidcIdentity.groups)
                             .where(OidcIdentity.user_id.in_(ids)))).all()
    return {r[0]: tuple(str(g) for g in (r[1] or ())) for r in rows}
