"""Access ends when the identity provider says so: a person disabled there (their tokens
revoked: the refresh fails) or taken out of the approver groups is refused at the next
re-check, at most ``access_recheck_s`` after the last one; every session of theirs ends, and
the call waiting on their approval stays waiting. SQLite and PostgreSQL."""

from __future__ import annotations

import time

import httpx
import pytest

from hookgate.storage.people import people
from tests.oidc.provider import mock_provider, sign_in
from tests.oidc.world import ALICE_ORG, pending_request, serving
from tests.portal.steps import WAIT_S
from tests.server.demo_world import auth

pytestmark = pytest.mark.both_databases

RECHECK_S = 1.0


def _refused_soon(c: httpx.Client) -> float:
    """Reads with the session until one is refused; the seconds it took."""
    began = time.monotonic()
    while time.monotonic() - began < WAIT_S:
        got = c.get("/api/confirmations")
        if got.status_code == 401:
            return time.monotonic() - began
        assert got.status_code == 200, got.text
        time.sleep(0.1)
    raise AssertionError("the session was never refused")


@pytest.mark.parametrize("how", ["disabled", "left_the_group"])
def test_a_person_the_provider_no_longer_confirms_decides_nothing(
        database_url: str, how: str) -> None:
    with mock_provider() as idp, serving(database_url, idp,
                                         access_recheck_s=RECHECK_S) as (srv, bank), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("carol-sub", ALICE_ORG)
        request = pending_request(c)
        sign_in(c, "carol-sub")
        me = c.get("/auth/session").json()
        csrf, user_id = me["csrf_token"], me["user_id"]
        with httpx.Client(base_url=srv.url, timeout=20) as second:
            sign_in(second, "carol-sub")  # a second session of the same person
            # A re-check that the provider confirms keeps the session open.
            time.sleep(RECHECK_S * 1.5)
            assert c.get("/api/confirmations").status_code == 200
            assert second.get("/api/confirmations").status_code == 200
            if how == "disabled":
                idp.disable("carol-sub")
            else:
                idp.set_user("carol-sub", {**ALICE_ORG, "groups": ["sales"]})
            _refused_soon(c)
            # Every session of the person ended, not only the one that asked.
            assert second.get("/api/confirmations").status_code == 401
        got = c.post(f"/api/confirmations/{request['id']}/respond",
                     json={"decision": "approve"}, headers={"X-CSRF-Token": csrf})
        assert got.status_code == 401, got.text
        # The call waiting on the approval stays waiting; nothing ran.
        shown = c.get(f"/api/confirmations/{request['id']}", headers=auth("alice")).json()
        assert shown["status"] == "pending" and bank.payments == []
        # Their user is disabled: no earlier vote or standing rule of theirs counts either
        # (the authority reads the record at the moment of use).
        record = srv.call(people(srv.runtime.db, [user_id]))[user_id]
        assert record.disabled is True
        # Confirmed by the provider again, they sign in again and may decide.
        idp.set_user("carol-sub", ALICE_ORG)
        with httpx.Client(base_url=srv.url, timeout=20) as again:
            assert sign_in(again, "carol-sub").status_code == 302
            assert srv.call(people(srv.runtime.db, [user_id]))[user_id].disabled is False
            csrf = again.get("/auth/session").json()["csrf_token"]
            done = again.post(f"/api/confirmations/{request['id']}/respond",
                              json={"decision": "approve"}, headers={"X-CSRF-Token": csrf})
            assert done.status_code == 200, done.text
