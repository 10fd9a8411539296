"""A careless or hostile HTTP client and model against a real server: chunked bodies over
the limit, the hook catalog without a token, and what the inbox, the CLI and a card show
of the arguments compared byte for byte with what the tool ran with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hookgate.channels.masking import render_args
from tests.live_server import live_server
from tests.server.demo_world import TOKENS, auth, world

pytestmark = pytest.mark.both_databases

#: Arguments that are easy to show wrongly: a fraction, a non-ASCII name, an emoji, text
#: that looks like console markup, and quotes and backslashes.
TRICKY = {"amount": 60000.125, "vendor": "[red]ACME[/red] Société \"X\" \\ 😀"}


def strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"non-JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def chunks(total: int, size: int = 1024) -> Iterator[bytes]:
    body = json.dumps({"agent_id": "buyer", "message": "x" * total}).encode()
    for i in range(0, len(body), size):
        yield body[i:i + size]


def test_a_chunked_body_over_the_limit_gets_413_like_a_sized_one(database_url: str) -> None:
    deployment, bank = world(database_url)
    with live_server(deployment, max_body=4096) as srv, \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        r = c.post("/api/runs", content=chunks(20_000),
                   headers={**auth("alice"), "content-type": "application/json"})
        assert r.status_code == 413, r.text
        assert "over 4096 bytes" in r.json()["error"]
        # Under the limit, a chunked body is read as usual.
        r = c.post("/api/runs", content=chunks(100),
                   headers={**auth("alice"), "content-type": "application/json"})
        assert r.status_code == 200, r.text
        assert len(c.get("/api/runs", headers=auth("alice")).json()) == 1
    assert bank.payments == []


def test_the_hook_catalog_needs_a_token(database_url: str) -> None:
    deployment, _ = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        assert c.get("/api/hooks").status_code == 401
        assert c.get("/api/hooks", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert c.get("/api/hooks", headers=auth("bob")).status_code == 200


def test_inbox_cli_and_card_show_exactly_what_runs(database_url: str) -> None:
    deployment, bank = world(database_url, turns=[
        {"tool_calls": [{"name": "oa__purchase_pay", "args": TRICKY}]}, {"answer": "paid"}])
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
                        headers=auth("alice")).json()["run_id"]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            r = c.get("/api/confirmations?status=pending", headers=auth("alice"))
            if r.json():
                break
            time.sleep(0.05)
        [pending] = strict(r.text)
        shown = pending["payload"]["args"]
        assert shown == TRICKY

        env = {**os.environ, "HOOKGATE_URL": srv.url, "HOOKGATE_TOKEN": TOKENS["alice"],
               "COLUMNS": "500"}
        listed = subprocess.run([sys.executable, "-m", "hookgate.cli.main", "approvals",
                                 "list"], env=env, capture_output=True, text=True,
                                timeout=60)
        assert listed.returncode == 0, listed.stderr
        assert json.dumps(TRICKY, ensure_ascii=False) in listed.stdout

        assert strict(render_args(shown)) == TRICKY  # the card's arguments block

        approved = subprocess.run([sys.executable, "-m", "hookgate.cli.main", "approvals",
                                   "approve", pending["id"]], env=env, capture_output=True,
                                  text=True, timeout=60)
        assert approved.returncode == 0, approved.stderr
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not bank.payments:
            time.sleep(0.05)
        run = strict(c.get(f"/api/runs/{run_id}", headers=auth("alice")).text)
    assert bank.payments == [TRICKY]
    ran = next(e for e in run["trace"] if e["type"] == "tool_result")
    assert ran["args"] == TRICKY


def test_every_api_route_but_chat_callbacks_needs_a_token(database_url: str) -> None:
    deployment, _ = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        spec = c.get("/openapi.json").json()
        checked = []
        for path, methods in spec["paths"].items():
            if not path.startswith("/api/") or path.endswith("/callback"):
                continue
            concrete = path.replace("{", "").replace("}", "")
            for method in methods:
                r = c.request(method.upper(), concrete, json={})
                assert r.status_code == 401, (method, path, r.status_code)
                checked.append(path)
        assert "/api/hooks" in checked and "/api/users/{user_id}/revoke" in checked
