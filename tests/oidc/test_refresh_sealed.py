"""The provider's refresh tokens are sealed at rest with HOOKGATE_SECRETS_KEY: the session
row never holds the token's text, a key that does not open it ends the session at its
re-check (fail closed), and without a key a provider's refresh token fails the sign-in.
SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from sqlalchemy import select

from hookgate.runtime.channel_records import SECRETS_KEY_ENV, SecretsKey
from hookgate.storage.database import Database
from hookgate.storage.people import people
from hookgate.storage.tables import OidcSession
from tests.live_server import LiveServer, free_port, live_server
from tests.oidc.provider import MockProvider, mock_provider, sign_in
from tests.oidc.world import ALICE_ORG, oidc_world, serving

pytestmark = pytest.mark.both_databases

RECHECK_S = 1.0


async def _stored(db: Database) -> list[tuple[str | None, str | None]]:
    """(refresh_token column, ended_reason) of every session row, as the database holds it."""
    async with db.session() as s:
        rows = (await s.execute(select(OidcSession.refresh_token,
                                       OidcSession.ended_reason))).all()
    return [(r[0], r[1]) for r in rows]


@contextmanager
def instance(database_url: str, idp: MockProvider) -> Iterator[LiveServer]:
    port = free_port()
    deployment, _bank = oidc_world(database_url, idp, port, access_recheck_s=RECHECK_S)
    with live_server(deployment, port=port) as srv:
        yield srv


def test_the_session_row_never_holds_the_refresh_tokens_text(
        database_url: str, secrets_key: str) -> None:
    with mock_provider() as idp, serving(database_url, idp,
                                         access_recheck_s=RECHECK_S) as (srv, _bank), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("carol-sub", ALICE_ORG)
        assert sign_in(c, "carol-sub").status_code == 302
        key = SecretsKey([secrets_key])
        [(sealed, _)] = srv.call(_stored(srv.runtime.db))
        assert sealed is not None
        token = key.open(sealed, channel_id="oidc-session")["refresh_token"]
        assert token and token not in sealed
        # The re-check reads it and stores the provider's new one, sealed as well.
        time.sleep(RECHECK_S * 1.5)
        assert c.get("/api/confirmations").status_code == 200
        [(again, _)] = srv.call(_stored(srv.runtime.db))
        assert again is not None and again != sealed
        fresh = key.open(again, channel_id="oidc-session")["refresh_token"]
        assert fresh not in again


def test_a_key_that_does_not_open_it_ends_the_session_at_its_recheck(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_provider() as idp:
        idp.set_user("carol-sub", ALICE_ORG)
        with instance(database_url, idp) as a, httpx.Client(base_url=a.url, timeout=20) as c:
            assert sign_in(c, "carol-sub").status_code == 302
            session = c.cookies.get("hookgate_session")
            user_id = c.get("/auth/session").json()["user_id"]
        # The server again (one at a time: SQLite), with a key that is not the one the
        # token was sealed with.
        monkeypatch.setenv(SECRETS_KEY_ENV, SecretsKey.generate())
        with instance(database_url, idp) as b, \
                httpx.Client(base_url=b.url, timeout=20) as other:
            time.sleep(RECHECK_S * 1.5)
            got = other.get("/api/confirmations",
                            headers={"Authorization": f"Bearer {session}"})
            assert got.status_code == 401, got.text
            [(token, reason)] = b.call(_stored(b.runtime.db))
            assert token is None and reason is not None and SECRETS_KEY_ENV in reason
            # The provider did not refuse the person: their user stays enabled.
            assert b.call(people(b.runtime.db, [user_id]))[user_id].disabled is False


def test_without_a_key_a_providers_refresh_token_fails_the_sign_in(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRETS_KEY_ENV)
    with mock_provider() as idp, serving(database_url, idp) as (srv, _bank), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("carol-sub", ALICE_ORG)
        got = sign_in(c, "carol-sub")
        assert got.status_code == 401, got.text
        assert SECRETS_KEY_ENV in got.text and "refresh token" in got.text
        assert srv.call(_stored(srv.runtime.db)) == []
        assert c.get("/auth/session").json()["signed_in"] is False


def test_rotation_reseals_the_sessions_refresh_tokens_under_the_new_key(
        database_url: str, secrets_key: str) -> None:
    from tests.channels.cli import hookgate

    with mock_provider() as idp:
        idp.set_user("carol-sub", ALICE_ORG)
        with instance(database_url, idp) as a, httpx.Client(base_url=a.url, timeout=20) as c:
            assert sign_in(c, "carol-sub").status_code == 302
            [(before, _)] = a.call(_stored(a.runtime.db))
        new = SecretsKey.generate()
        done = hookgate("secrets", "rotate", "--database", database_url,
                        env={SECRETS_KEY_ENV: f"{new},{secrets_key}"})
        assert done.returncode == 0, done.stderr
        assert "re-encrypted 1 sign-in session refresh token(s)" in done.stdout
        with instance(database_url, idp) as b:
            [(after, _)] = b.call(_stored(b.runtime.db))
        assert after is not None and before is not None
        token = SecretsKey([new]).open(after, channel_id="oidc-session")["refresh_token"]
        assert token == SecretsKey([secrets_key]).open(
            before, channel_id="oidc-session")["refresh_token"]
        with pytest.raises(Exception, match="cannot be decrypted"):
            SecretsKey([secrets_key]).open(after, channel_id="oidc-session")
