"""Two real `hookgate serve` processes on one PostgreSQL, people signing in through a real
OpenID Connect provider on loopback: a session opened on one instance works on the other;
once the provider disables the person, every instance refuses their decisions within
``oidc.access_recheck_s`` (the last check's time is in the database), and the call waiting
on their approval stays waiting."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate.runtime.channel_records import SECRETS_KEY_ENV, SecretsKey
from tests.instances import Instance, MessageModel
from tests.oidc.provider import CLIENT_ID, MockProvider, mock_provider, sign_in
from tests.oidc.world import ALICE_ORG
from tests.server.test_restart import wait_for

ALICE = "oidc-instances-token-alice"
RECHECK_S = 2

CONFIG = """
database: {database}
orgs: [{{id: acme, name: ACME}}]
users:
  - {{id: alice, org: acme, admin: true, token: {alice}}}
tools: [tests.instance_tools:pay]
models:
  fake: {{type: openai, base_url: "{model_url}", api_key: k, model: m, max_retries: 0}}
agents:
  - id: clerk
    name: Clerk
    org: acme
    owner: alice
    model: fake
    tools: [pay]
    confirmation_mode: inline_only
    confirmation_approver_scope: org_members
server: {{public_url: "{public_url}"}}
oidc:
  issuer: "{issuer}"
  client_id: {client_id}
  client_secret: "${{HOOKGATE_TEST_OIDC_SECRET}}"
  org_claim: org
  approver_groups: [approvers]
  access_recheck_s: {recheck}
  cookie_secure: false
worker: {{heartbeat_s: 0.5, stalled_after_s: 2.5, shutdown_grace_s: 1}}
"""


class Pair:
    def __init__(self, workdir: Path, database_url: str, model: MessageModel,
                 idp: MockProvider) -> None:
        self.ledger = workdir / "ledger.txt"
        config = workdir / "hookgate.yaml"
        env = {"HOOKGATE_TEST_LEDGER": str(self.ledger),
               "HOOKGATE_TEST_OIDC_SECRET": "inbox-secret",
               # Both instances seal and open the sessions' refresh tokens with one key.
               SECRETS_KEY_ENV: SecretsKey.generate()}
        self.a = Instance("a", config, workdir, env=env)
        self.b = Instance("b", config, workdir, env=env)
        config.write_text(CONFIG.format(
            database=database_url, model_url=model.base_url, alice=ALICE,
            public_url=self.a.url, issuer=idp.url, client_id=CLIENT_ID, recheck=RECHECK_S))
        self.idp = idp

    def paid(self) -> list[str]:
        text = self.ledger.read_text() if self.ledger.exists() else ""
        return [line for line in text.splitlines() if line.startswith("pay")]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, postgres_server_url: str,
         postgres_template: str) -> Iterator[Pair]:
    from tests.conftest import _fresh_pg_database

    model = MessageModel()
    model.start()
    with mock_provider() as idp:
        p = Pair(tmp_path_factory.mktemp("oidc-instances"),
                 _fresh_pg_database(postgres_server_url, postgres_template), model, idp)
        try:
            for inst in (p.a, p.b):
                inst.spawn()
            for inst in (p.a, p.b):
                inst.wait_up()
            yield p
        finally:
            for inst in (p.a, p.b):
                inst.stop()
            model.stop()


def _alice() -> dict[str, str]:
    return {"Authorization": f"Bearer {ALICE}"}


def _pending(inst: Instance, run_id: str) -> dict[str, Any] | None:
    r = httpx.get(inst.url + "/api/confirmations?status=pending", headers=_alice(),
                  timeout=10)
    return next((x for x in r.json() if x["run_id"] == run_id), None)


def test_a_person_disabled_at_the_provider_is_refused_on_every_instance(pair: Pair) -> None:
    ref = uuid.uuid4().hex[:8]
    started = httpx.post(pair.a.url + "/api/runs", headers=_alice(), timeout=10,
                         json={"agent_id": "clerk", "message": f"pay:{ref}"})
    assert started.status_code == 200, started.text
    run_id = started.json()["run_id"]
    request = wait_for(lambda: _pending(pair.b, run_id), "the payment request")
    pair.idp.set_user("carol-sub", ALICE_ORG)
    with httpx.Client(base_url=pair.a.url, timeout=20) as on_a, \
            httpx.Client(base_url=pair.b.url, timeout=20) as on_b:
        assert sign_in(on_a, "carol-sub").status_code == 302
        # The session (signed in on a) is the same person on b.
        on_b.cookies = on_a.cookies
        me = on_b.get("/auth/session")
        assert me.status_code == 200, me.text
        csrf = me.json()["csrf_token"]
        assert on_b.get(f"/api/confirmations/{request['id']}").json()["can_decide"] is True

        pair.idp.disable("carol-sub")
        disabled_at = time.monotonic()

        def refused_on_b() -> bool:
            got = on_b.get("/api/confirmations")
            assert got.status_code in (200, 401), got.text
            return got.status_code == 401

        wait_for(refused_on_b, "b to refuse the disabled person", 60)
        waited = time.monotonic() - disabled_at
        # Refused within access_recheck_s of the last check (plus the polling's own time).
        assert waited < RECHECK_S + 5, waited
        for inst, client in ((pair.a, on_a), (pair.b, on_b)):
            got = client.post(f"/api/confirmations/{request['id']}/respond",
                              json={"decision": "approve"}, headers={"X-CSRF-Token": csrf})
            assert got.status_code == 401, (inst.name, got.text)
    # The call waiting on the approval stays waiting on both; nothing was paid.
    assert _pending(pair.a, run_id) is not None and _pending(pair.b, run_id) is not None
    assert pair.paid() == []
