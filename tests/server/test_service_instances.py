"""Two real `hookgate serve` processes on one PostgreSQL: the agent's service identity starts a
run on one instance and can decide nothing of it on the other (respond, batch, rule), while a
person can; and a person moved to another org in the database reads and decides nothing of
the old org on either instance at once, whatever a token lookup remembered."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.instances import Instance, MessageModel
from tests.server.test_restart import wait_for

TOKENS = {u: f"service-token-{u}" for u in ("alice", "bob", "bot")}
SAID = "service (agent) identity"

CONFIG = """
database: {database}
orgs: [{{id: acme, name: ACME}}, {{id: other, name: Other}}]
users:
  - {{id: alice, org: acme, admin: true, token: {alice}}}
  - {{id: bob, org: acme, token: {bob}}}
  - {{id: clerk-bot, org: acme, kind: service, token: {bot}}}
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
worker: {{heartbeat_s: 0.5, stalled_after_s: 2.5, shutdown_grace_s: 1}}
"""


class Pair:
    def __init__(self, workdir: Path, database_url: str, model: MessageModel) -> None:
        self.ledger = workdir / "ledger.txt"
        self.dsn = database_url.replace("postgresql+asyncpg://", "postgresql://")
        config = workdir / "hookgate.yaml"
        config.write_text(CONFIG.format(database=database_url, model_url=model.base_url,
                                        **TOKENS))
        env = {"HOOKGATE_TEST_LEDGER": str(self.ledger)}
        self.a = Instance("a", config, workdir, env=env)
        self.b = Instance("b", config, workdir, env=env)

    def paid(self, ref: str) -> int:
        text = self.ledger.read_text() if self.ledger.exists() else ""
        return sum(1 for line in text.splitlines() if line.split()[:2] == ["pay", ref])

    def sql(self, statement: str, *args: Any) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(statement, args)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory,
         postgres_server_url: str, postgres_template: str
         ) -> Iterator[Pair]:
    from tests.conftest import _fresh_pg_database

    model = MessageModel()
    model.start()
    p = Pair(tmp_path_factory.mktemp("service"),
             _fresh_pg_database(postgres_server_url, postgres_template), model)
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


def _h(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


def _start(inst: Instance, ref: str, user: str) -> str:
    r = httpx.post(inst.url + "/api/runs", json={"agent_id": "clerk", "message": f"pay:{ref}"},
                   headers=_h(user), timeout=10)
    assert r.status_code == 200, r.text
    return str(r.json()["run_id"])


def _pending(inst: Instance, run_id: str) -> dict[str, Any] | None:
    r = httpx.get(inst.url + "/api/confirmations?status=pending", headers=_h("alice"),
                  timeout=10)
    return next((x for x in r.json() if x["run_id"] == run_id), None)


def _respond(inst: Instance, request_id: str, user: str) -> httpx.Response:
    return httpx.post(f"{inst.url}/api/confirmations/{request_id}/respond",
                      json={"decision": "approve"}, headers=_h(user), timeout=10)


def _status(inst: Instance, run_id: str) -> str:
    r = httpx.get(f"{inst.url}/api/runs/{run_id}", headers=_h("alice"), timeout=10)
    return str(r.json()["status"])


def test_the_service_that_started_a_run_decides_nothing_of_it_on_either_instance(
        pair: Pair) -> None:
    ref = uuid.uuid4().hex[:8]
    run_id = _start(pair.a, ref, "bot")
    request = wait_for(lambda: _pending(pair.b, run_id), "the payment request")
    assert request["requested_by"] == "clerk-bot"
    for inst in (pair.a, pair.b):
        r = _respond(inst, request["id"], "bot")
        assert r.status_code == 403 and SAID in r.text, r.text
        r = httpx.post(f"{inst.url}/api/confirmations/batch", headers=_h("bot"), timeout=10,
                       json={"ids": [request["id"]], "decision": "approve"})
        assert r.status_code == 403 and SAID in r.text, r.text
        r = httpx.post(f"{inst.url}/api/approval-rules", headers=_h("bot"), timeout=10,
                       json={"agent_id": "clerk", "tool_name": "pay", "scope": "org"})
        assert r.status_code == 403 and SAID in r.text, r.text
    assert _pending(pair.a, run_id) is not None and pair.paid(ref) == 0
    assert _respond(pair.b, request["id"], "bob").status_code == 200
    wait_for(lambda: _status(pair.a, run_id) == "completed", "the run to finish", 40)
    assert pair.paid(ref) == 1


def test_a_person_moved_in_the_database_reads_and_decides_nothing_at_once(
        pair: Pair) -> None:
    ref = uuid.uuid4().hex[:8]
    run_id = _start(pair.a, ref, "alice")
    request = wait_for(lambda: _pending(pair.a, run_id), "the payment request")
    rid = request["id"]
    for inst in (pair.a, pair.b):  # bob's token is looked up (and remembered) on both
        assert httpx.get(f"{inst.url}/api/confirmations/{rid}", headers=_h("bob"),
                         timeout=10).status_code == 200
    pair.sql("UPDATE users SET org_id = 'other' WHERE id = 'bob'")
    try:
        for inst in (pair.b, pair.a):
            r = httpx.get(f"{inst.url}/api/confirmations/{rid}", headers=_h("bob"),
                          timeout=10)
            assert r.status_code == 404, r.text
            assert _respond(inst, rid, "bob").status_code == 404
        assert _pending(pair.a, run_id) is not None and pair.paid(ref) == 0
    finally:
        pair.sql("UPDATE users SET org_id = 'acme' WHERE id = 'bob'")
    assert _respond(pair.b, rid, "bob").status_code == 200
    wait_for(lambda: _status(pair.a, run_id) == "completed", "the run to finish", 40)
    assert pair.paid(ref) == 1
