"""OpenID Connect Back-Channel Logout on a real server: the provider's signed logout token
ends every session of the person it names (the next request with them is refused); forged,
foreign, stale, nonce-carrying or event-less tokens end nothing. SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any

import httpx
import pytest
from joserfc.jwk import RSAKey

from hookgate.config.oidc import OidcSpec
from hookgate.server.oidc.provider import BACKCHANNEL_EVENT
from hookgate.storage.oidc_sessions import Person, open_session, record_person
from tests.live_server import LiveServer, live_server
from tests.oidc.keys import CLIENT, KeyServer
from tests.server.demo_world import world

pytestmark = pytest.mark.both_databases


def _session(srv: LiveServer, issuer: str, sub: str) -> str:
    """A session of ``sub`` as a sign-in opens one (the person recorded, then the session)."""
    person = Person(issuer=issuer, subject=sub, org_id="acme", admin=False,
                    groups=("approvers",))
    db = srv.runtime.db
    user_id = srv.call(record_person(db, person))
    session_id, _ = srv.call(open_session(db, person, user_id, kind="browser",
                                          refresh_token=None, ttl_s=3600))
    return str(session_id)


def _signed_in(srv: LiveServer, session_id: str) -> bool:
    got = httpx.get(f"{srv.url}/auth/session", cookies={"hookgate_session": session_id},
                    timeout=10)
    return bool(got.json()["signed_in"])


def _logout_token(keys: KeyServer, **claims: Any) -> str:
    base: dict[str, Any] = {"jti": uuid.uuid4().hex, "events": {BACKCHANNEL_EVENT: {}},
                            "nonce": None, "exp": None, **claims}
    return keys.token(**base)


def test_the_providers_logout_ends_every_session_of_the_person(
        database_url: str, keys: KeyServer) -> None:
    deployment, _ = world(database_url)
    deployment = dataclasses.replace(deployment, public_url="http://127.0.0.1:9", oidc=OidcSpec(
        issuer=keys.url, client_id=CLIENT, client_secret="s", org="acme",
        access_recheck_s=3600, cookie_secure=False))
    attacker = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    now = int(time.time())
    with live_server(deployment) as srv:
        carol = [_session(srv, keys.url, "carol-sub") for _ in range(2)]
        dave = _session(srv, keys.url, "dave-sub")

        def post(token: str) -> httpx.Response:
            return httpx.post(f"{srv.url}/auth/backchannel-logout",
                              data={"logout_token": token}, timeout=10)

        refused = {
            "forged": _logout_token(keys, key=attacker),
            "another client": _logout_token(keys, aud="another-client"),
            "another issuer": _logout_token(keys, iss="https://evil.example"),
            "stale": _logout_token(keys, iat=now - 3600),
            "an ID token": _logout_token(keys, nonce="n"),
            "no event": _logout_token(keys, events={"other": {}}),
            "no jti": _logout_token(keys, jti=None),
        }
        for what, token in refused.items():
            got = post(token)
            assert got.status_code == 400, (what, got.text)
        assert post("").status_code == 400
        assert all(_signed_in(srv, s) for s in [*carol, dave])

        done = post(_logout_token(keys))
        assert done.status_code == 200 and done.json() == {"ended": 2}
        assert done.headers["cache-control"] == "no-store"
        assert not any(_signed_in(srv, s) for s in carol)
        assert _signed_in(srv, dave)
        got = httpx.get(f"{srv.url}/api/confirmations", timeout=10,
                        cookies={"hookgate_session": carol[0]})
        assert got.status_code == 401
