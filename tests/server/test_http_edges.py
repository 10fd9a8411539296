"""The HTTP API's edges on a real server: booleans are JSON booleans, a body sent without a
JSON Content-Type is told so, the message length limit is the documented one; and the
`hookgate approvals` CLI prints ids whole, ready to copy, at 80 columns."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate.server.schemas import MAX_MESSAGE_CHARS
from tests.live_server import live_server
from tests.server.demo_world import TOKENS, auth, world

#: The HTTP API reference page, which states the limits.
HTTP_DOCS = Path(__file__).resolve().parents[2] / "docs" / "reference" / "http-api.md"


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'hookgate.db'}"


@pytest.mark.parametrize("value", ["yes", 1, 0, "true", None, [True]])
def test_read_only_takes_only_true_or_false(tmp_path: Path, value: Any) -> None:
    deployment, _ = world(sqlite_url(tmp_path))
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        r = c.put("/api/orgs/acme/read_only", json={"read_only": value}, headers=auth("alice"))

        assert r.status_code == 422, r.text
        assert "read_only" in r.json()["error"]
        flag = c.get("/api/orgs/acme/read_only", headers=auth("alice")).json()
        assert flag["read_only"] is False  # nothing changed
        ok = c.put("/api/orgs/acme/read_only", json={"read_only": True}, headers=auth("alice"))
        assert ok.status_code == 200 and ok.json()["read_only"] is True


def test_a_wrong_type_is_named_with_what_was_sent(tmp_path: Path) -> None:
    deployment, _ = world(sqlite_url(tmp_path))
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        r = c.put("/api/orgs/acme/read_only", json={"read_only": "yes"}, headers=auth("alice"))
        assert r.json()["error"] == "'read_only' must be true or false, got \"yes\""
        r = c.post("/api/runs", json={"agent_id": 7, "message": "pay"}, headers=auth("alice"))
        assert r.status_code == 422 and r.json()["error"] == "'agent_id' must be a string, got 7"


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_json_body_without_a_json_content_type_is_told_so(tmp_path: Path,
                                                            content_type: str | None) -> None:
    deployment, bank = world(sqlite_url(tmp_path))
    headers = dict(auth("alice"))
    if content_type:
        headers["Content-Type"] = content_type
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        r = c.post("/api/runs", content=b'{"agent_id": "buyer", "message": "pay"}',
                   headers=headers)

        assert r.status_code == 422
        shown = f"'{content_type}'" if content_type else "none"
        assert r.json()["error"] == (
            "the request body must be JSON sent with 'Content-Type: application/json' "
            f"(this request's Content-Type: {shown})")
        assert c.get("/api/runs", headers=auth("alice")).json() == []
        # The same body with the header starts the run; a JSON array is still not an object.
        good = c.post("/api/runs", content=b'{"agent_id": "buyer", "message": "pay"}',
                      headers={**auth("alice"), "Content-Type": "application/json"})
        assert good.status_code == 200, good.text
        array = c.post("/api/runs", json=["buyer"], headers=auth("alice"))
        assert array.json()["error"] == "the request body must be a JSON object"
    assert bank.payments == []


def test_the_message_limit_is_the_documented_one(tmp_path: Path) -> None:
    documented = " ".join(HTTP_DOCS.read_text(encoding="utf-8").split())
    assert f"`message` up to {MAX_MESSAGE_CHARS:,} characters" in documented
    deployment, _ = world(sqlite_url(tmp_path))
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        over = c.post("/api/runs", json={"agent_id": "buyer", "message": "x" * (
            MAX_MESSAGE_CHARS + 1)}, headers=auth("alice"))
        at = c.post("/api/runs", json={"agent_id": "buyer", "message": "x" * MAX_MESSAGE_CHARS},
                    headers=auth("alice"))

    assert over.status_code == 422 and "at most 100000 characters" in over.json()["error"]
    assert at.status_code == 200, at.text


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    env.update(COLUMNS="80", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=120)


def test_approvals_list_prints_whole_ids_that_approve_takes(tmp_path: Path) -> None:
    deployment, bank = world(sqlite_url(tmp_path))
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        r = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
                   headers=auth("alice"))
        assert r.status_code == 200, r.text
        deadline = time.monotonic() + 20
        pending: list[dict[str, Any]] = []
        while not pending and time.monotonic() < deadline:
            pending = c.get("/api/confirmations?status=pending", headers=auth("alice")).json()
            time.sleep(0.05)
        [request] = pending

        listed = cli("approvals", "list", "--url", srv.url, "--token", TOKENS["alice"],
                     cwd=tmp_path)

        assert listed.returncode == 0, listed.stderr
        first = listed.stdout.splitlines()[0]
        copied = first.split()[0]  # what a person double-clicks in the terminal
        assert copied == request["id"]
        assert "pending" in first and "oa__purchase_pay" in first
        assert '{"amount": 60000.0, "vendor": "ACME"}' in listed.stdout
        approved = cli("approvals", "approve", copied, "--url", srv.url, "--token",
                       TOKENS["alice"], cwd=tmp_path)
        assert approved.returncode == 0, approved.stderr
        assert f"{copied}: approved by alice" in approved.stdout
        deadline = time.monotonic() + 20
        while not bank.payments and time.monotonic() < deadline:
            time.sleep(0.05)
    assert bank.payments == [{"amount": 60000.0, "vendor": "ACME"}]
