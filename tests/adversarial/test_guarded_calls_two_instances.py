"""A hostile client of the guarded-call API against two real `hookgate serve` processes on
one PostgreSQL database: an approved call asked on both at once starts on exactly one of
them (the other answers that it already ran), an approval given on one instance is not a
second call's on the other, and a call id re-used with other arguments is refused on the
instance that did not see it first."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate.client import Allowed, AlreadyRan, Client, GuardRefused, Pending
from tests.instances import Instance

CONFIG = """
database: {database}
orgs: [{{id: acme, name: ACME}}]
users:
  - {{id: alice, org: acme, admin: true, token: tok-alice}}
  - {{id: bot, org: acme, token: tok-bot}}
models: {{none: {{type: scripted, turns: [{{answer: "-"}}]}}}}
agents:
  - id: payer
    org: acme
    owner: alice
    model: none
    confirmation_approver_scope: agent_owner
    model_config_json:
      hooks: {{class_hooks: [audit_log]}}
      guarded_calls: {{rules: [{{matcher: transfer, requires_confirmation: true}}]}}
worker: {{heartbeat_s: 0.5, stalled_after_s: 2.5, shutdown_grace_s: 1}}
"""


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory,
         postgres_server_url: str, postgres_template: str
         ) -> Iterator[tuple[Instance, Instance]]:
    from tests.conftest import _fresh_pg_database

    workdir: Path = tmp_path_factory.mktemp("v1-pair")
    config = workdir / "hookgate.yaml"
    config.write_text(CONFIG.format(
        database=_fresh_pg_database(postgres_server_url, postgres_template)))
    a, b = Instance("a", config, workdir), Instance("b", config, workdir)
    try:
        for inst in (a, b):
            inst.spawn()
        for inst in (a, b):
            inst.wait_up()
        yield a, b
    finally:
        for inst in (a, b):
            inst.stop()


def approve(inst: Instance, request_id: str) -> None:
    r = httpx.post(f"{inst.url}/api/confirmations/{request_id}/respond",
                   json={"decision": "approve"}, headers={"Authorization": "Bearer tok-alice"})
    assert r.status_code == 200, r.text


def test_an_approved_call_asked_on_both_instances_at_once_starts_on_one(
        pair: tuple[Instance, Instance], attempt: Any) -> None:
    a, b = pair
    args = {"amount": 900, "to": "mallory"}
    with Client(a.url, "tok-bot", framework="langgraph") as on_a, \
            Client(b.url, "tok-bot", framework="langgraph") as on_b:
        asked = on_a.before_call(agent="payer", session_id="s1", call_id="c1",
                                 tool="transfer", arguments=args)
        assert isinstance(asked, Pending)
        approve(b, asked.request_id)  # decided on the other instance
        verdicts: list[Any] = []
        start = threading.Barrier(4)

        def ask(guard: Client) -> None:
            start.wait()
            verdicts.append(guard.before_call(agent="payer", session_id="s1", call_id="c1",
                                              tool="transfer", arguments=args))

        threads = [threading.Thread(target=ask, args=(g,)) for g in (on_a, on_b, on_a, on_b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        started = [v for v in verdicts if isinstance(v, Allowed)]
        attempt.record("v1 API, two instances: one approved call started twice",
                       len(started) != 1)
        assert len(verdicts) == 4 and len(started) == 1
        assert all(isinstance(v, AlreadyRan) for v in verdicts if v not in started), \
            [getattr(v, "reason", v) for v in verdicts]

        # The approval is this call's: the same arguments under a new id ask again, on
        # either instance.
        fresh = on_b.before_call(agent="payer", session_id="s1", call_id="c2",
                                 tool="transfer", arguments=args)
        attempt.record("v1 API, two instances: an approval re-used by a new call id",
                       not isinstance(fresh, Pending))
        assert isinstance(fresh, Pending)


def test_a_call_id_reused_with_other_arguments_on_the_other_instance_is_refused(
        pair: tuple[Instance, Instance], attempt: Any) -> None:
    a, b = pair
    with Client(a.url, "tok-bot", framework="langgraph") as on_a, \
            Client(b.url, "tok-bot", framework="langgraph") as on_b:
        asked = on_a.before_call(agent="payer", session_id="s2", call_id="d1",
                                 tool="transfer", arguments={"amount": 1, "to": "bob"})
        assert isinstance(asked, Pending)
        approve(a, asked.request_id)
        refused: Exception | None = None
        try:
            swapped = on_b.before_call(agent="payer", session_id="s2", call_id="d1",
                                       tool="transfer", arguments={"amount": 10**6, "to": "eve"})
        except GuardRefused as exc:
            refused, swapped = exc, None
        attempt.record("v1 API, two instances: an approved call id re-used with other "
                       "arguments", refused is None)
        assert refused is not None and swapped is None
