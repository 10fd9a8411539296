"""The CLI and the server log on a guarded call of an external agent, against a real server
(SQLite and PostgreSQL) and real `hookgate` subprocesses: `approvals show` prints no empty
"user asked", `--url` takes the server's address with its /api path, and the normal wait for
a person is an INFO line that reads as normal, not a hook failure."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookgate.client import Client, Pending
from tests.api_v1.test_guarded_calls import ALICE, BOT, deployment
from tests.live_server import LiveServer, live_server

pytestmark = pytest.mark.both_databases
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def server(database_url: str) -> Iterator[LiveServer]:
    with live_server(deployment(database_url)) as srv:
        yield srv


def hookgate(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "HOOKGATE_URL",
                                                            "HOOKGATE_TOKEN")}
    env.update(COLUMNS="200", NO_COLOR="1",
               PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def _pending_call(server: LiveServer, session: str = "s-cli") -> Pending:
    with Client(server.url, BOT, framework="langgraph") as guard:
        asked = guard.before_call(agent="payer", session_id=session, call_id="t1",
                                  tool="transfer", arguments={"amount": 500, "to": "bob"})
    assert isinstance(asked, Pending)
    return asked


def test_approvals_show_of_a_guarded_call_prints_no_empty_user_asked(
        server: LiveServer) -> None:
    asked = _pending_call(server)
    shown = hookgate("approvals", "show", asked.request_id, "--url", server.url,
                     "--token", ALICE)
    assert shown.returncode == 0, shown.stderr
    labels = [line.split()[0] for line in shown.stdout.splitlines() if line.strip()]
    assert "user" not in labels, shown.stdout  # no "user asked" without a message
    # Every line is a label and its value (the labels take 13 columns).
    assert all(line[13:].strip() for line in shown.stdout.splitlines() if line.strip()), \
        shown.stdout
    assert "transfer" in shown.stdout and asked.request_id in shown.stdout


@pytest.mark.parametrize("suffix", ["/api", "/api/", "/api/v1", "/"])
def test_url_with_the_api_path_reaches_the_server(server: LiveServer, suffix: str) -> None:
    asked = _pending_call(server)
    listed = hookgate("approvals", "list", "--url", server.url + suffix, "--token", ALICE)
    assert listed.returncode == 0, listed.stderr
    assert asked.request_id in listed.stdout
    rejected = hookgate("approvals", "reject", asked.request_id, "--url",
                        server.url + suffix, "--token", ALICE)
    assert rejected.returncode == 0, rejected.stderr
    assert "rejected by alice" in rejected.stdout


def test_a_url_that_is_no_address_is_one_clear_line() -> None:
    done = hookgate("approvals", "list", "--url", "127.0.0.1:8000", "--token", ALICE)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: --url must be the server's address, e.g. http://127.0.0.1:8000, not "
        "'127.0.0.1:8000'")


def test_waiting_for_a_person_is_logged_as_info_and_reads_as_normal(
        server: LiveServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="hookgate")
    asked = _pending_call(server, session="s-log")
    said = [(r.levelno, r.getMessage()) for r in caplog.records
            if r.name.startswith("hookgate")]
    about = [(level, text) for level, text in said if "transfer" in text]
    assert about == [(logging.INFO, "tool transfer (run "
                      f"{about[0][1].split('(run ')[1].split(')')[0]}) waits for a person's "
                      f"decision on request {asked.request_id}")], said
    assert not [t for level, t in said if level >= logging.WARNING], said
