"""Session-aware limits over HTTP on two real `hookgate serve` processes sharing one
PostgreSQL database: 64 concurrent calls split between them admit exactly as many as a
count per session and a sum per user allow, no more and no fewer."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate.client import Allowed, Client, Denied
from tests.instances import Instance
from tests.loopback_http import SSL_CONTEXT

CALLS = 64
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
    model_config_json:
      hooks:
        class_hooks:
          - name: session_limits
            params:
              limits:
                deletes: {{tools: ["delete_*"], per: session, window: 1h, count: 20}}
                transfers: {{tools: [transfer], per: user, window: 1h, sum: amount,
                             max: 5000}}
worker: {{heartbeat_s: 0.5, stalled_after_s: 2.5, shutdown_grace_s: 1}}
"""


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory,
         postgres_server_url: str, postgres_template: str
         ) -> Iterator[tuple[Instance, Instance]]:
    from tests.conftest import _fresh_pg_database

    workdir: Path = tmp_path_factory.mktemp("limits-pair")
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


def fire(pair: tuple[Instance, Instance], session: str, tool: str,
         arguments: dict[str, Any]) -> list[Any]:
    """``CALLS`` calls at once, alternately on each instance, each with a client of its own
    (its httpx client given the one SSL context: a default one reads the CA bundle, ~25 ms
    of CPU, 64 times a round)."""
    start = threading.Barrier(CALLS)

    def one(i: int) -> Any:
        with Client(pair[i % 2].url, "tok-bot", framework="langgraph", timeout=60,
                    http=httpx.Client(timeout=60, verify=SSL_CONTEXT)) as guard:
            start.wait(60)
            return guard.before_call(agent="payer", session_id=session, call_id=f"c{i}",
                                     tool=tool, arguments=arguments)
    with ThreadPoolExecutor(CALLS) as pool:
        return list(pool.map(one, range(CALLS)))


def test_a_count_per_session_admits_exactly_twenty_of_64_across_two_instances(
        pair: tuple[Instance, Instance]) -> None:
    for session in ("s1", "s2"):
        verdicts = fire(pair, session, "delete_file", {"path": "x"})
        assert sum(isinstance(v, Allowed) for v in verdicts) == 20, verdicts
        assert all(isinstance(v, Allowed | Denied) for v in verdicts), verdicts


def test_a_sum_per_user_admits_exactly_what_fits_across_two_instances(
        pair: tuple[Instance, Instance]) -> None:
    verdicts = fire(pair, "s3", "transfer", {"amount": 100, "to": "bob"})
    assert sum(isinstance(v, Allowed) for v in verdicts) == 50, verdicts
    refused = [v for v in verdicts if isinstance(v, Denied)]
    assert len(refused) == 14
    assert all("limit 'transfers' allows at most 5000 in amount per user per hour"
               in v.reason for v in refused), refused
