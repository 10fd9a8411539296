"""Revocation made on one `hookgate serve` reaches the streams another one serves (PostgreSQL,
real processes): a token revoked through instance B, or a user dropped from the configuration
an instance C starts with, ends the streams instance A holds open for them, and no request made
afterwards reaches them."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adversarial_tally import TALLY
from tests.instances import Instance, MessageModel
from tests.loopback_http import HTTP, SSL_CONTEXT
from tests.server.test_restart import wait_for
from tests.server.test_sse import wait_until

TOKENS = {"alice": "streams-token-alice", "bob": "streams-token-bob",
          "carol": "streams-token-carol"}
ENDS_WITHIN_S = 30.0

CONFIG = """
database: {database}
orgs: [{{id: acme, name: ACME}}]
users:
  - {{id: alice, org: acme, admin: true, token: {alice}}}
  - {{id: bob, org: acme, token: {bob}}}
{carol_entry}tools: [tests.instance_tools:pay]
models:
  fake: {{type: openai, base_url: "{model_url}", api_key: k, model: m, max_retries: 0}}
agents:
  - {{id: clerk, name: Clerk, org: acme, owner: alice, model: fake, tools: [pay],
     confirmation_mode: inline_only, confirmation_approver_scope: org_members}}
"""
CAROL = "  - {{id: carol, org: acme, token: {carol}}}\n"


def h(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


class OpenStream:
    """An SSE stream read in a thread: its raw lines, and whether it ended."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.lines: list[str] = []
        self.ended = threading.Event()
        opened = threading.Event()
        self._client = httpx.Client(timeout=httpx.Timeout(10, read=120), verify=SSL_CONTEXT)

        def read() -> None:
            try:
                with self._client.stream("GET", url, headers=headers) as resp:
                    assert resp.status_code == 200
                    opened.set()
                    for line in resp.iter_lines():
                        self.lines.append(line)
            except httpx.HTTPError:
                pass
            finally:
                opened.set()
                self.ended.set()

        threading.Thread(target=read, daemon=True).start()
        assert opened.wait(10) and not self.ended.is_set()

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def close(self) -> None:
        self._client.close()


@pytest.fixture
def cluster(tmp_path: Path, postgres_server_url: str) -> Iterator[dict[str, Any]]:
    from tests.conftest import _drop_pg_database, _fresh_pg_database

    model = MessageModel()
    model.start()
    database = _fresh_pg_database(postgres_server_url)
    fields = {"database": database, "model_url": model.base_url, **TOKENS}
    full = tmp_path / "hookgate.yaml"
    full.write_text(CONFIG.format(carol_entry=CAROL.format(**TOKENS), **fields))
    without_carol = tmp_path / "without-carol.yaml"
    without_carol.write_text(CONFIG.format(carol_entry="", **fields))
    env = {"HOOKGATE_TEST_LEDGER": str(tmp_path / "ledger.txt")}
    a = Instance("a", full, tmp_path, env=env)
    b = Instance("b", full, tmp_path, env=env)
    c = Instance("c", without_carol, tmp_path, env=env)
    try:
        for inst in (a, b):
            inst.spawn()
        for inst in (a, b):
            inst.wait_up()
        yield {"a": a, "b": b, "c": c}
    finally:
        for inst in (a, b, c):
            inst.stop()
        model.stop()
        _drop_pg_database(postgres_server_url, database)


def start_pay(url: str, ref: str) -> str:
    r = HTTP.post(url + "/api/runs", json={"agent_id": "clerk", "message": f"pay:{ref}"},
                  headers=h("alice"), timeout=30)
    assert r.status_code == 200, r.text
    return str(r.json()["run_id"])


def pending_ref(url: str, ref: str) -> None:
    def found() -> bool:
        r = HTTP.get(url + "/api/confirmations", params={"status": "pending"},
                     headers=h("alice"), timeout=30)
        return any(q["payload"]["args"].get("ref") == ref for q in r.json())

    # Every 0.1 s (wait_until reads every 0.02 s: for a condition that asks the server,
    # 50 requests a second, each one served by B).
    wait_for(found, f"the request for {ref}", 60)


def test_a_revocation_on_another_instance_or_a_user_dropped_by_its_configuration_ends_streams(
        cluster: dict[str, Any]) -> None:
    a, b, c = cluster["a"], cluster["b"], cluster["c"]
    before, after, last = (f"{w}{uuid.uuid4().hex[:12]}" for w in ("before", "after", "last"))
    run_id = start_pay(b.url, before)
    bob_inbox = OpenStream(a.url + "/api/confirmations/events", h("bob"))
    carol_inbox = OpenStream(a.url + "/api/confirmations/events", h("carol"))
    try:
        pending_ref(b.url, before)
        bob_run = OpenStream(f"{a.url}/api/runs/{run_id}/events", h("bob"))
        try:
            wait_until(lambda: "confirmation_pending" in bob_run.text, timeout=60)
            # Bob's token revoked through B: A's streams for him end.
            r = HTTP.post(b.url + "/api/users/bob/revoke", headers=h("alice"), timeout=30)
            assert r.status_code == 200 and r.json()["revoked"], r.text
            start_pay(b.url, after)
            pending_ref(b.url, after)
            assert bob_inbox.ended.wait(ENDS_WITHIN_S), "A's inbox stream outlived the revocation"
            assert bob_run.ended.wait(ENDS_WITHIN_S), "A's run stream outlived the revocation"
        finally:
            bob_run.close()
        wait_until(lambda: after in carol_inbox.text, timeout=60)  # carol still sees the inbox
        # Carol dropped from the configuration instance C starts with: A's stream for her ends.
        c.spawn()
        c.wait_up()
        assert carol_inbox.ended.wait(ENDS_WITHIN_S), "A's stream outlived carol's removal"
        start_pay(b.url, last)
        pending_ref(b.url, last)
    finally:
        bob_inbox.close()
        carol_inbox.close()
    leaked = after in bob_inbox.text or last in carol_inbox.text
    TALLY.record("stream on one instance after revocation on another", leaked)
    assert not leaked
    assert before in bob_inbox.text  # it did deliver while bob had access
    for user in ("bob", "carol"):
        assert HTTP.get(a.url + "/api/confirmations/events", headers=h(user),
                        timeout=30).status_code == 401
