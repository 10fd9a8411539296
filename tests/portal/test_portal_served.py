"""The portal's files are served, and the live streams take the token in the URL.

Browsers' EventSource cannot send an Authorization header, so the two SSE routes also accept
``?access_token=``; every other route must keep refusing a token there.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import httpx
import pytest

from hookgate.server.app import STATIC
from tests.live_server import live_server
from tests.portal.steps import pending_request, start_run, wait_finished
from tests.server.demo_world import TOKENS, auth, world
from tests.sse import read_events

ANSWER_ONLY = [{"answer": "hello"}]


def test_the_page_and_its_files_are_served_with_their_types(database_url: str) -> None:
    deployment, _ = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        page = c.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert '<script src="/static/app.js" defer></script>' in page.text
        assert '<link rel="stylesheet" href="/static/style.css">' in page.text
        assert 'name="viewport"' in page.text

        script = c.get("/static/app.js")
        assert script.status_code == 200
        assert re.match(r"(text|application)/javascript", script.headers["content-type"])
        style = c.get("/static/style.css")
        assert style.status_code == 200
        assert style.headers["content-type"].startswith("text/css")
        icon = c.get("/static/favicon.svg")
        assert icon.status_code == 200
        assert icon.headers["content-type"].startswith("image/svg+xml")


def test_the_portal_needs_nothing_from_other_sites() -> None:
    # No CDN, no external fonts: the page works on a network with no way out.
    for name in ("index.html", "app.js", "style.css"):
        text = (STATIC / name).read_text(encoding="utf-8")
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text, re.IGNORECASE), name


def test_the_script_never_writes_markup_from_data() -> None:
    # Everything from the API reaches the page as text; no API that parses HTML is used.
    script = (STATIC / "app.js").read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                 "new Function"):
        assert sink not in script, sink


def test_the_run_stream_accepts_the_token_in_the_url(database_url: str) -> None:
    deployment, _ = world(database_url, turns=ANSWER_ONLY)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c)
        wait_finished(c, run_id)
        url = f"/api/runs/{run_id}/events"
        with c.stream("GET", url, params={"access_token": TOKENS["bob"]}) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            types = [ev.event for ev in read_events(resp) if not ev.comment]
        assert types[0] == "session_start" and types[-2:] == ["answer", "done"]

        assert c.get(url, params={"access_token": "nope"}).status_code == 401
        assert c.get(url).status_code == 401
        # A token from another org sees no such run, however it is sent.
        assert c.get(url, params={"access_token": TOKENS["mallory"]}).status_code == 404


def test_the_inbox_stream_accepts_the_token_in_the_url(database_url: str) -> None:
    deployment, _ = world(database_url)
    with live_server(deployment, keepalive_s=0.2) as srv, \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        assert c.get("/api/confirmations/events",
                     params={"access_token": "nope"}).status_code == 401
        started = threading.Event()

        def start_run_once_listening() -> None:
            started.wait(10)
            with httpx.Client(base_url=srv.url, timeout=20) as other:
                start_run(other)

        starter = threading.Thread(target=start_run_once_listening)
        starter.start()
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + 15
        with c.stream("GET", "/api/confirmations/events",
                      params={"access_token": TOKENS["bob"]}) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            for ev in read_events(resp):
                started.set()
                if ev.event == "confirmation":
                    seen.append(ev.data)
                    break
                assert time.monotonic() < deadline, "no confirmation event arrived"
        starter.join(20)
        assert seen[0]["status"] == "pending"
        assert seen[0]["payload"]["args"] == {"amount": 60000.0, "vendor": "ACME"}
        # The view is the listener's own: bob did not start the run, so he may not decide.
        assert seen[0]["can_decide"] is False
        c.post(f"/api/confirmations/{seen[0]['id']}/respond", json={"decision": "reject"},
               headers=auth("alice"))


@pytest.mark.parametrize("method,path", [
    ("GET", "/api/me"),
    ("GET", "/api/agents"),
    ("GET", "/api/runs"),
    ("GET", "/api/confirmations"),
    ("POST", "/api/runs"),
])
def test_other_routes_refuse_the_token_in_the_url(database_url: str, method: str,
                                                   path: str) -> None:
    deployment, _ = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        body = {"agent_id": "buyer", "message": "x"} if method == "POST" else None
        r = c.request(method, path, params={"access_token": TOKENS["alice"]}, json=body)
        assert r.status_code == 401, r.text
        assert "Authorization: Bearer" in r.json()["error"]
        assert c.get("/api/runs", headers=auth("alice")).json() == []


def test_a_decision_cannot_be_made_with_the_token_in_the_url(database_url: str) -> None:
    deployment, bank = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c)
        pending = pending_request(c)
        url = f"/api/confirmations/{pending['id']}"
        r = c.post(f"{url}/respond", params={"access_token": TOKENS["alice"]},
                   json={"decision": "approve"})
        assert r.status_code == 401
        assert c.get(url, params={"access_token": TOKENS["alice"]}).status_code == 401
        assert c.get(url, headers=auth("alice")).json()["status"] == "pending"
        assert bank.payments == []
        c.post(f"{url}/respond", json={"decision": "reject"}, headers=auth("alice"))
        wait_finished(c, run_id)
