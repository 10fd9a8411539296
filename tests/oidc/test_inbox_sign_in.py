"""Signing in to the inbox through a real OpenID Connect provider on loopback: the session
cookie's flags, JIT users from ``iss`` + ``sub``, approver groups deciding who may sign in and
decide, CSRF on the decide route, a cookie useless in another org, sign-out, and a person's
API token switched off (``tokens_for_people: false``). SQLite and PostgreSQL."""

from __future__ import annotations

import time

import httpx
import pytest

from hookgate.storage.audit import verify
from hookgate.storage.oidc_sessions import identity_of
from tests.oidc.provider import mock_provider, sign_in
from tests.oidc.world import ALICE_ORG, pending_request, serving
from tests.portal.steps import WAIT_S
from tests.server.demo_world import auth

pytestmark = pytest.mark.both_databases


def _csrf(c: httpx.Client) -> str:
    got = c.get("/auth/session")
    assert got.status_code == 200, got.text
    return str(got.json()["csrf_token"])


def test_a_person_signs_in_is_created_from_iss_and_sub_and_approves(
        database_url: str) -> None:
    with mock_provider() as idp, serving(database_url, idp) as (srv, bank), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("carol-sub", ALICE_ORG)
        request = pending_request(c)
        back = sign_in(c, "carol-sub")
        assert back.status_code == 302 and back.headers["location"] == "/"
        cookie = back.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=lax" in cookie
        me = c.get("/auth/session").json()
        assert me["org_id"] == "acme" and me["subject"] == "carol-sub"
        assert me["issuer"] == idp.url and me["admin"] is False
        # The user is keyed by issuer + subject, never by the email.
        assert srv.call(identity_of(srv.runtime.db, me["user_id"])) == (idp.url, "carol-sub")
        assert "carol" not in me["user_id"]
        # Reads with the cookie; decides with the cookie and the session's CSRF token.
        assert c.get(f"/api/confirmations/{request['id']}").json()["can_decide"] is True
        done = c.post(f"/api/confirmations/{request['id']}/respond",
                      json={"decision": "approve"}, headers={"X-CSRF-Token": _csrf(c)})
        assert done.status_code == 200, done.text
        assert done.json()["status"] == "approved"
        deadline = time.monotonic() + WAIT_S
        while not bank.payments and time.monotonic() < deadline:
            time.sleep(0.05)
        assert bank.payments == [{"amount": 60000, "vendor": "ACME"}]
        # The decision names the verified identity: on the request, and in the audit row,
        # hashed with it.
        verified = f"oidc:{idp.url}#carol-sub"
        assert done.json()["decision"]["channel_identity"] == verified
        rows: list[dict[str, object]] = []
        while not rows and time.monotonic() < deadline:
            rows = [r for r in c.get("/api/audit", headers=auth("alice")).json()["items"]
                    if r.get("request_id") == request["id"]]
            time.sleep(0.05)
        assert rows and rows[0]["approver"] == f"{me['user_id']} ({verified})", rows
        assert srv.call(verify(srv.runtime.db)).ok
        # Signing in again finds the same user, whatever the email says now.
        idp.set_user("carol-sub", {**ALICE_ORG, "email": "c.new@acme.example"})
        with httpx.Client(base_url=srv.url, timeout=20) as again:
            sign_in(again, "carol-sub")
            assert again.get("/auth/session").json()["user_id"] == me["user_id"]


def test_a_csrf_attempt_on_the_decide_route_is_refused(database_url: str) -> None:
    with mock_provider() as idp, serving(database_url, idp) as (srv, bank), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("carol-sub", ALICE_ORG)
        request = pending_request(c)
        sign_in(c, "carol-sub")
        url = f"/api/confirmations/{request['id']}/respond"
        # A cross-site form or fetch carries the cookie but not the session's token.
        for headers in ({}, {"X-CSRF-Token": "guessed"},
                        {"Content-Type": "application/json"}):
            got = c.post(url, json={"decision": "approve"}, headers=headers)
            assert got.status_code == 403, got.text
            assert "CSRF" in got.json()["detail"]
        # Another session's token does not do either.
        with httpx.Client(base_url=srv.url, timeout=20) as other:
            sign_in(other, "carol-sub")
            foreign = _csrf(other)
        assert c.post(url, json={"decision": "approve"},
                      headers={"X-CSRF-Token": foreign}).status_code == 403
        assert c.get(f"/api/confirmations/{request['id']}").json()["status"] == "pending"
        assert bank.payments == []
        # A bearer token (no cookie) is unaffected by CSRF.
        with httpx.Client(base_url=srv.url, timeout=20) as api:
            done = api.post(url, json={"decision": "approve"}, headers=auth("bob"))
            assert done.status_code == 200, done.text


def test_a_session_of_another_org_is_useless(database_url: str) -> None:
    with mock_provider() as idp, serving(database_url, idp) as (srv, bank), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("eve-sub", {"org": "other", "groups": ["approvers"]})
        request = pending_request(c)
        sign_in(c, "eve-sub")
        csrf = _csrf(c)
        assert c.get("/api/confirmations").json() == []
        assert c.get(f"/api/confirmations/{request['id']}").status_code == 404
        got = c.post(f"/api/confirmations/{request['id']}/respond",
                     json={"decision": "approve"}, headers={"X-CSRF-Token": csrf})
        assert got.status_code == 404
        assert bank.payments == []


def test_group_mapping_decides_who_may_sign_in_and_who_is_admin(database_url: str) -> None:
    with mock_provider() as idp, serving(database_url, idp) as (srv, _), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("dave-sub", {"org": "acme", "groups": ["sales"]})
        refused = sign_in(c, "dave-sub")
        assert refused.status_code == 401 and "approver groups" in refused.text
        assert c.get("/auth/session").json() == {"signed_in": False, "oidc": True}
        assert c.get("/api/confirmations").status_code == 401
        idp.set_user("dave-sub", {"org": "acme", "groups": ["sales", "hookgate-admins"]})
        assert sign_in(c, "dave-sub").status_code == 302
        assert c.get("/auth/session").json()["admin"] is True
        # An org the server does not serve is refused, not created.
        idp.set_user("zed-sub", {"org": "nowhere", "groups": ["approvers"]})
        with httpx.Client(base_url=srv.url, timeout=20) as z:
            got = sign_in(z, "zed-sub")
            assert got.status_code == 401 and "does not serve" in got.text


def test_sign_out_ends_the_session(database_url: str) -> None:
    with mock_provider() as idp, serving(database_url, idp) as (srv, _), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("carol-sub", ALICE_ORG)
        sign_in(c, "carol-sub")
        cookie = c.cookies.get("hookgate_session")
        assert cookie
        # Sign-out is a state change: without the CSRF token it is refused.
        assert c.post("/auth/logout").status_code == 403
        assert c.post("/auth/logout", headers={"X-CSRF-Token": _csrf(c)}).status_code == 200
        # The old cookie, replayed, signs in as nobody.
        with httpx.Client(base_url=srv.url, timeout=20,
                          cookies={"hookgate_session": cookie}) as replay:
            assert replay.get("/api/confirmations").status_code == 401
            assert replay.get("/auth/session").json() == {"signed_in": False, "oidc": True}


def test_a_replayed_callback_and_a_forged_state_are_refused(database_url: str) -> None:
    with mock_provider() as idp, serving(database_url, idp) as (srv, _), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("carol-sub", ALICE_ORG)
        from tests.oidc.provider import authorize
        start = c.get("/auth/login")
        back = authorize(start.headers["location"], "carol-sub")
        assert c.get(back).status_code == 302
        with httpx.Client(base_url=srv.url, timeout=20) as attacker:
            again = attacker.get(back)
            assert again.status_code == 401 and "state" in again.text
            assert attacker.get("/auth/callback", params={"code": "x", "state": "forged"}
                                ).status_code == 401
            assert "hookgate_session" not in attacker.cookies
        # return_to never leaves the site.
        assert c.get("/auth/login", params={"return_to": "https://evil.example/"}
                     ).status_code == 400
        assert c.get("/auth/login", params={"return_to": "//evil.example/"}
                     ).status_code == 400


def test_a_sign_in_finishes_only_in_the_browser_that_started_it(database_url: str) -> None:
    """Login CSRF: an attacker's own sign-in, its callback URL sent to a victim's browser,
    must not sign the victim in as the attacker."""
    from tests.oidc.provider import authorize

    with mock_provider() as idp, serving(database_url, idp) as (srv, _):
        idp.set_user("eve-sub", {"org": "acme", "groups": ["approvers"]})
        with httpx.Client(base_url=srv.url, timeout=20) as attacker:
            start = attacker.get("/auth/login")
            assert "hookgate_login" in start.headers["set-cookie"]
            planted = authorize(start.headers["location"], "eve-sub")
        with httpx.Client(base_url=srv.url, timeout=20) as victim:
            got = victim.get(planted)
            assert got.status_code == 401 and "started elsewhere" in got.text
            assert "hookgate_session" not in victim.cookies
            assert victim.get("/auth/session").json()["signed_in"] is False


def test_people_tokens_can_be_switched_off(database_url: str) -> None:
    with mock_provider() as idp, serving(database_url, idp, tokens_for_people=False) as (
            srv, _), httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("carol-sub", ALICE_ORG)
        assert c.get("/api/confirmations", headers=auth("bob")).status_code == 401
        sign_in(c, "carol-sub")
        assert c.get("/api/confirmations").status_code == 200
