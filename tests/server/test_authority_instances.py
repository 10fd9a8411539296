"""Two real `hookgate serve` processes on one PostgreSQL: an approver's edit sent to the
instance that did not start the run is judged on the edited call there too — raising it over
the two-approver, four-eyes threshold is refused (nothing paid, still pending), lowering it
pays exactly the edited call once — and a vote given on one instance stops counting on the
other once its voter moved org."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.instances import Instance, MessageModel
from tests.server.test_restart import wait_for

TOKENS = {u: f"authority-token-{u}" for u in ("alice", "bob", "olivia", "carol")}

CONFIG = """
database: {database}
orgs: [{{id: acme, name: ACME}}, {{id: other, name: Other}}]
users:
  - {{id: alice, org: acme, admin: true, token: {alice}}}
  - {{id: bob, org: acme, token: {bob}}}
  - {{id: olivia, org: acme, token: {olivia}}}
  - {{id: carol, org: acme, token: {carol}}}
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
    approval_quorum:
      - {{matcher: pay, when: "'big' in args.ref", approvals_required: 2,
         allow_self_approval: false}}
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

    def paid(self) -> Counter[str]:
        text = self.ledger.read_text() if self.ledger.exists() else ""
        return Counter(line.split()[1] for line in text.splitlines() if line.startswith("pay"))

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
    p = Pair(tmp_path_factory.mktemp("authority"),
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


def _start(inst: Instance, ref: str) -> str:
    r = httpx.post(inst.url + "/api/runs", json={"agent_id": "clerk", "message": f"pay:{ref}"},
                   headers=_h("alice"), timeout=10)
    assert r.status_code == 200, r.text
    return str(r.json()["run_id"])


def _pending(inst: Instance, run_id: str) -> dict[str, Any] | None:
    r = httpx.get(inst.url + "/api/confirmations?status=pending", headers=_h("alice"),
                  timeout=10)
    return next((x for x in r.json() if x["run_id"] == run_id), None)


def _respond(inst: Instance, request_id: str, user: str, **body: Any) -> httpx.Response:
    return httpx.post(f"{inst.url}/api/confirmations/{request_id}/respond",
                      json={"decision": "approve", **body}, headers=_h(user), timeout=10)


def _status(inst: Instance, run_id: str) -> str:
    r = httpx.get(f"{inst.url}/api/runs/{run_id}", headers=_h("alice"), timeout=10)
    return str(r.json()["status"])


def test_an_edit_sent_to_the_other_instance_is_judged_on_the_edited_call(pair: Pair) -> None:
    ref = uuid.uuid4().hex[:8]
    run_id = _start(pair.a, ref)
    request = wait_for(lambda: _pending(pair.b, run_id), "the payment request")
    assert request["approvals"]["required"] == 1
    for user in ("bob", "alice"):  # one approval, and the requester's own
        r = _respond(pair.b, request["id"], user, arguments={"ref": f"big{ref}"})
        assert r.status_code == 422, r.text
        assert "the edit raises what this call needs" in r.json()["error"]
    assert _pending(pair.a, run_id) is not None and pair.paid()[f"big{ref}"] == 0
    # An edit that keeps the requirement runs, exactly as edited, once.
    r = _respond(pair.b, request["id"], "alice", arguments={"ref": f"small{ref}"})
    assert r.status_code == 200, r.text
    wait_for(lambda: _status(pair.a, run_id) == "completed", "the run to finish", 40)
    paid = pair.paid()
    assert (paid[f"small{ref}"], paid[ref], paid[f"big{ref}"]) == (1, 0, 0), paid


def test_a_vote_given_on_one_instance_stops_counting_on_the_other_once_its_voter_moved(
        pair: Pair) -> None:
    ref = f"big{uuid.uuid4().hex[:8]}"
    run_id = _start(pair.a, ref)
    request = wait_for(lambda: _pending(pair.a, run_id), "the payment request")
    assert request["approvals"]["required"] == 2
    r = _respond(pair.a, request["id"], "bob")
    assert r.status_code == 200 and r.json()["approvals"]["count"] == 1, r.text
    pair.sql("UPDATE users SET org_id = 'other' WHERE id = 'bob'")
    try:
        r = _respond(pair.b, request["id"], "olivia")
        assert r.status_code == 200, r.text
        assert (r.json()["status"], r.json()["approvals"]["count"]) == ("pending", 1)
        assert pair.paid()[ref] == 0
        r = _respond(pair.b, request["id"], "carol")
        assert r.status_code == 200 and r.json()["status"] == "approved", r.text
        wait_for(lambda: _status(pair.a, run_id) == "completed", "the run to finish", 40)
        assert pair.paid()[ref] == 1
    finally:
        pair.sql("UPDATE users SET org_id = 'acme' WHERE id = 'bob'")
