"""Rows of no further use are deleted when someone signs in: sessions that ended or expired,
and sign-ins started more than LOGIN_TTL ago whose callback never came. Open sessions and
sign-ins under way stay. SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select

from hookgate.storage.database import Database
from hookgate.storage.oidc_sessions import LOGIN_TTL
from hookgate.storage.tables import OidcLogin, OidcSession
from hookgate.storage.types import utcnow
from tests.oidc.provider import mock_provider, sign_in
from tests.oidc.world import ALICE_ORG, serving

pytestmark = pytest.mark.both_databases


async def _plant(db: Database) -> None:
    """alice's sessions (one ended, one expired, one open) and two sign-ins (one stale)."""
    now = utcnow()
    hour = timedelta(hours=1)

    def session(name: str, **values: object) -> OidcSession:
        fields: dict[str, object] = {
            "id_sha256": name.ljust(64, "0"), "user_id": "alice", "issuer": "https://i",
            "subject": "alice-sub", "kind": "browser", "csrf_token": "c", "created_at":
            now - hour, "expires_at": now + hour, "checked_at": now, **values}
        return OidcSession(**fields)

    def login(state: str, created_at: object) -> OidcLogin:
        return OidcLogin(state=state, nonce="n", code_verifier="v", binding_sha256="b",
                         return_to="/", created_at=created_at)

    async with db.transaction() as s:
        s.add_all([session("ended", ended_at=now - timedelta(minutes=1),
                           ended_reason="signed out"),
                   session("expired", expires_at=now - timedelta(seconds=1)),
                   session("open"),
                   login("stale", now - LOGIN_TTL - timedelta(minutes=1)),
                   login("fresh", now)])


async def _left(db: Database) -> tuple[set[str], set[str]]:
    async with db.session() as s:
        sessions = (await s.execute(select(OidcSession.id_sha256, OidcSession.user_id))).all()
        logins = (await s.execute(select(OidcLogin.state))).scalars().all()
    return {i.rstrip("0") if u == "alice" else "new" for i, u in sessions}, set(logins)


def test_ended_and_expired_sessions_and_stale_sign_ins_are_deleted_at_sign_in(
        database_url: str) -> None:
    with mock_provider() as idp, serving(database_url, idp) as (srv, _bank), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("carol-sub", ALICE_ORG)
        srv.call(_plant(srv.runtime.db))
        assert srv.call(_left(srv.runtime.db)) == ({"ended", "expired", "open"},
                                                   {"stale", "fresh"})
        assert sign_in(c, "carol-sub").status_code == 302
        assert srv.call(_left(srv.runtime.db)) == ({"open", "new"}, {"fresh"})
