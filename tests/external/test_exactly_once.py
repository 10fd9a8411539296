"""PostToolUse of an external call runs once, by a claim: reports of one call arriving at the
same moment (on one server, and on two real `hookgate serve` processes over one PostgreSQL)
give one audit row and every reporter the same observation."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.external.world import ALICE, BOT, ask, audit_rows, deployment, h
from tests.instances import Instance
from tests.live_server import LiveServer, live_server


@pytest.fixture
def srv(database_url: str) -> Iterator[LiveServer]:
    # A PostToolUse hook that takes a moment: the reports overlap inside the chain.
    slow = {"event": "PostToolUse", "name": "slow_reader", "command": "cat > /dev/null; sleep 0.3"}
    with live_server(deployment(database_url, command_hooks=[slow])) as server:
        yield server


async def _reports(urls: list[str], call: str, n: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=60) as client:
        return list(await asyncio.gather(*(
            client.post(f"{urls[i % len(urls)]}/api/v1/calls/{call}/result", headers=h(),
                        json={"output": f"result seen by reporter {i}"})
            for i in range(n))))


def _check_once(answers: list[httpx.Response], rows: list[dict[str, Any]],
                attempt: Any, where: str) -> None:
    assert all(r.status_code == 200 for r in answers), [r.text for r in answers]
    texts = {r.json()["text"] for r in answers}
    attempt.record(f"external: concurrent reports run PostToolUse twice ({where})",
                   len(rows) != 1 or len(texts) != 1)
    assert len(texts) == 1, texts
    assert [row["outcome"] for row in rows] == ["ok"]


@pytest.mark.both_databases
def test_concurrent_reports_of_one_call_run_post_tool_use_once(
        srv: LiveServer, attempt: Any) -> None:
    for round_ in range(3):
        allowed = ask(srv.url, "s-once", f"c{round_}", "search", {"q": "x"})
        assert allowed.json()["decision"] == "allow", allowed.text
        answers = asyncio.run(_reports([srv.url], allowed.json()["call"], 8))
        _check_once(answers, audit_rows(srv, f"c{round_}"), attempt, "one server")
        again = httpx.get(f"{srv.url}/api/v1/calls/{allowed.json()['call']}", headers=h())
        assert again.json()["decision"] == "already_ran"
        assert again.json()["observation"] == answers[0].json()["text"]


CONFIG = """
database: {database}
orgs: [{{id: acme, name: ACME}}]
users:
  - {{id: alice, org: acme, admin: true, token: {alice}}}
  - {{id: bot, org: acme, token: {bot}}}
models: {{none: {{type: scripted, turns: [{{answer: "-"}}]}}}}
agents:
  - id: payer
    org: acme
    owner: alice
    model: none
    confirmation_approver_scope: agent_owner
    model_config_json:
      hooks: {{class_hooks: [audit_log]}}
"""


# Two instances share a PostgreSQL database (a SQLite file has one writer process).
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_reports_on_two_serve_processes_run_post_tool_use_once(
        tmp_path: Path, database_url: str, attempt: Any) -> None:
    config = tmp_path / "hookgate.yaml"
    config.write_text(CONFIG.format(database=database_url, alice=ALICE, bot=BOT))
    one, two = Instance("one", config, tmp_path), Instance("two", config, tmp_path)
    try:
        for inst in (one, two):
            inst.spawn()
        for inst in (one, two):
            inst.wait_up()
        for round_ in range(3):
            allowed = ask(one.url, "s-two", f"p{round_}", "search", {"q": "x"})
            assert allowed.json()["decision"] == "allow", allowed.text
            answers = asyncio.run(_reports([one.url, two.url], allowed.json()["call"], 6))
            _check_once(answers, audit_rows(one.url, f"p{round_}"), attempt,
                        "two serve processes")
    finally:
        for inst in (one, two):
            inst.stop()
