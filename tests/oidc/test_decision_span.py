"""A decision made in a provider session names the verified identity on the approval's span
(``hookgate.approval.channel_identity``), beside who decided; a token's decision names none.
On SQLite, where the run waits in process and its wait span sees the decision (on PostgreSQL
the run waits in a job, and the span of its resumption is the telemetry tests' subject)."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.oidc.provider import mock_provider, sign_in
from tests.oidc.world import ALICE_ORG, pending_request, serving
from tests.portal.steps import WAIT_S
from tests.server.demo_world import auth
from tests.telemetry.conftest import Otel


def _span(otel: Otel) -> dict[str, object]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        decided = [dict(s.attributes or {}) for s in otel.named("hookgate.approval.wait")
                   if (s.attributes or {}).get("hookgate.approval.outcome") == "approved"]
        if decided:
            return decided[0]
        time.sleep(0.05)
    raise AssertionError(f"no approval span: {otel.names()}")


@pytest.mark.parametrize("how", ["oidc", "token"])
def test_the_approval_span_names_the_verified_identity(database_url: str, otel: Otel,
                                                        how: str) -> None:
    with mock_provider() as idp, serving(database_url, idp) as (srv, _bank), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("carol-sub", ALICE_ORG)
        request = pending_request(c)
        url = f"/api/confirmations/{request['id']}/respond"
        if how == "oidc":
            sign_in(c, "carol-sub")
            csrf = c.get("/auth/session").json()["csrf_token"]
            done = c.post(url, json={"decision": "approve"}, headers={"X-CSRF-Token": csrf})
        else:
            done = c.post(url, json={"decision": "approve"}, headers=auth("bob"))
        assert done.status_code == 200, done.text
        attributes = _span(otel)
    if how == "oidc":
        assert attributes["hookgate.approval.channel_identity"] == f"oidc:{idp.url}#carol-sub"
        assert str(attributes["hookgate.approval.decided_by"]).startswith("oidc-")
    else:
        assert "hookgate.approval.channel_identity" not in attributes
        assert attributes["hookgate.approval.decided_by"] == "bob"
