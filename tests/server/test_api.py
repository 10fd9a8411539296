"""The HTTP API on a real server on loopback, over SQLite and PostgreSQL."""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

import httpx
import pytest

from hookgate.runs.events_bus import FOLLOW_RECHECK_S
from tests.live_server import live_server
from tests.server.demo_world import auth, world
from tests.sse import read_events

pytestmark = pytest.mark.both_databases


def wait_pending(client: httpx.Client, user: str = "alice", timeout: float = 15
                 ) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = client.get("/api/confirmations", params={"status": "pending"}, headers=auth(user))
        assert r.status_code == 200
        if r.json():
            return r.json()[0]  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError("no pending request appeared")


def wait_run(client: httpx.Client, run_id: str, user: str = "alice", timeout: float = 15
             ) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/api/runs/{run_id}", headers=auth(user)).json()
        if body["status"] not in ("running", "awaiting_approval"):
            return body  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish")


def start(client: httpx.Client, user: str = "alice") -> str:
    r = client.post("/api/runs", json={"agent_id": "buyer", "message": "pay ACME"},
                    headers=auth(user))
    assert r.status_code == 200, r.text
    return r.json()["run_id"]  # type: ignore[no-any-return]


def test_payment_waits_for_approval_over_http_and_runs_once(database_url: str) -> None:
    deployment, bank = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start(c)
        pending = wait_pending(c)
        assert pending["payload"] == {"tool_name": "oa__purchase_pay",
                                      "args": {"amount": 60000.0, "vendor": "ACME"},
                                      "args_sha256": pending["payload"]["args_sha256"],
                                      "edited_args": None, "edited_args_sha256": None}
        assert pending["run_id"] == run_id and pending["requested_by"] == "alice"
        assert pending["can_decide"] is True and pending["agent_name"] == "Purchasing agent"
        assert bank.payments == []

        r = c.post(f"/api/confirmations/{pending['id']}/respond",
                   json={"decision": "approve", "reason": "ok by me"}, headers=auth("alice"))
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "approved"
        assert r.json()["decision"]["responded_by"] == "alice"

        run = wait_run(c, run_id)
        assert run["status"] == "completed" and run["answer"] == "Paid ACME."
        assert bank.payments == [{"amount": 60000.0, "vendor": "ACME"}]
        record = c.get(f"/api/confirmations/{pending['id']}", headers=auth("bob")).json()
        assert record["decision"]["reason"] == "ok by me"
        assert record["decision"]["responded_at"]


def test_rejected_over_http_never_pays(database_url: str) -> None:
    deployment, bank = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start(c)
        pending = wait_pending(c)
        r = c.post(f"/api/confirmations/{pending['id']}/respond",
                   json={"decision": "reject"}, headers=auth("alice"))
        assert r.status_code == 200 and r.json()["status"] == "rejected"
        run = wait_run(c, run_id)
        assert bank.payments == []
        blocked = [e for e in run["trace"] if e["type"] == "tool_blocked"]
        assert blocked and "rejected" in blocked[0]["observation"]


def test_requests_without_a_valid_token_are_refused(database_url: str) -> None:
    deployment, _ = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        assert c.get("/api/confirmations").status_code == 401
        assert c.get("/api/confirmations",
                     headers={"Authorization": "Bearer nope"}).status_code == 401
        assert c.post("/api/runs", json={"agent_id": "buyer", "message": "x"},
                      headers={"Authorization": "Basic abc"}).status_code == 401
        assert c.get("/api/runs").status_code == 401


def test_decisions_follow_status_codes_and_change_nothing_when_refused(
        database_url: str) -> None:
    deployment, bank = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start(c)
        pending = wait_pending(c)
        url = f"/api/confirmations/{pending['id']}/respond"

        r = c.post(url, json={"decision": "approve"}, headers=auth("bob"))
        assert r.status_code == 403 and "only the user who started the run" in r.json()["error"]
        r = c.post(url, json={"decision": "approve"}, headers=auth("mallory"))
        assert r.status_code == 404  # another org cannot even see it
        assert c.post("/api/confirmations/cr_missing/respond", json={"decision": "approve"},
                      headers=auth("alice")).status_code == 404
        still = c.get(f"/api/confirmations/{pending['id']}", headers=auth("alice")).json()
        assert still["status"] == "pending" and still["decision"]["responded_by"] is None

        assert c.post(url, json={"decision": "approve"}, headers=auth("alice")).status_code == 200
        late = c.post(url, json={"decision": "reject"}, headers=auth("alice"))
        assert late.status_code == 409
        assert "already decided: approved by alice" in late.json()["error"]
        wait_run(c, run_id)
        assert len(bank.payments) == 1


def test_malformed_bodies_get_422_with_a_readable_message(database_url: str) -> None:
    deployment, _ = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start(c)
        pending = wait_pending(c)
        url = f"/api/confirmations/{pending['id']}/respond"
        h = {**auth("alice"), "content-type": "application/json"}
        r = c.post(url, content=b"{not json", headers=h)
        assert r.status_code == 422 and "not valid JSON" in r.json()["error"]
        r = c.post(url, json={"decision": "approve", "sudo": True}, headers=auth("alice"))
        assert r.status_code == 422 and "unknown field 'sudo'" in r.json()["error"]
        r = c.post(url, json={"decision": "yes please"}, headers=auth("alice"))
        assert r.status_code == 422 and "decision" in r.json()["error"]
        r = c.post(url, json=["approve"], headers=auth("alice"))
        assert r.status_code == 422
        r = c.post("/api/runs", json={"agent_id": "buyer"}, headers=auth("alice"))
        assert r.status_code == 422 and "missing field 'message'" in r.json()["error"]
        r = c.post("/api/runs", json={"agent_id": "nobody", "message": "x"},
                   headers=auth("alice"))
        assert r.status_code == 404
        still = c.get(f"/api/confirmations/{pending['id']}", headers=auth("alice")).json()
        assert still["status"] == "pending"
        c.post(url, json={"decision": "reject"}, headers=auth("alice"))
        wait_run(c, run_id)


def test_oversized_bodies_are_refused(database_url: str) -> None:
    deployment, _ = world(database_url)
    with live_server(deployment, max_body=4096) as srv, \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        r = c.post("/api/runs", json={"agent_id": "buyer", "message": "x" * 10_000},
                   headers=auth("alice"))
        assert r.status_code == 413
        assert c.get("/api/runs", headers=auth("alice")).json() == []


def test_a_hundred_concurrent_responds_give_exactly_one_200(database_url: str) -> None:
    deployment, bank = world(database_url, scope="org_members")
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=60) as c:
        run_id = start(c)
        pending = wait_pending(c)
        url = f"{srv.url}/api/confirmations/{pending['id']}/respond"
        users = ["alice", "bob", "olivia"]

        def respond(i: int) -> int:
            with httpx.Client(timeout=60) as own:
                return own.post(url, json={"decision": "approve" if i % 2 else "reject"},
                                headers=auth(users[i % 3])).status_code

        with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
            codes = list(pool.map(respond, range(100)))
        assert codes.count(200) == 1, codes
        assert codes.count(409) == 99
        wait_run(c, run_id)
        assert len(bank.payments) <= 1


def test_users_see_only_their_orgs_runs(database_url: str) -> None:
    deployment, _ = world(database_url, turns=[{"answer": "hello"}])
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start(c)
        wait_run(c, run_id)
        assert c.get(f"/api/runs/{run_id}", headers=auth("mallory")).status_code == 404
        assert c.get(f"/api/runs/{run_id}/events", headers=auth("mallory")).status_code == 404
        assert c.get("/api/runs", headers=auth("mallory")).json() == []
        r = c.post("/api/runs", json={"agent_id": "buyer", "message": "x"},
                   headers=auth("mallory"))
        assert r.status_code == 404


def test_run_stream_shows_the_wait_then_continues_and_replays_from_last_event_id(
        database_url: str) -> None:
    deployment, bank = world(database_url)
    with live_server(deployment, keepalive_s=0.3) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as c:
        run_id = start(c)
        seen: list[Any] = []
        keepalives = 0
        with c.stream("GET", f"/api/runs/{run_id}/events", headers=auth("alice")) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            for ev in read_events(resp):
                if ev.comment:
                    keepalives += 1
                    if keepalives == 2:
                        pending = wait_pending(c)
                        c.post(f"/api/confirmations/{pending['id']}/respond",
                               json={"decision": "approve"}, headers=auth("alice"))
                    continue
                seen.append(ev)
        types = [e.event for e in seen]
        assert types.index("confirmation_pending") < types.index("confirmation_resolved")
        assert types.index("confirmation_resolved") < types.index("tool_result")
        assert types[-2:] == ["answer", "done"]
        assert keepalives >= 2
        ids = [int(e.id) for e in seen]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        assert len(bank.payments) == 1

        cut = ids[2]
        with c.stream("GET", f"/api/runs/{run_id}/events",
                      headers={**auth("alice"), "Last-Event-ID": str(cut)}) as resp:
            replay = [ev for ev in read_events(resp) if not ev.comment]
        assert [int(e.id) for e in replay] == [i for i in ids if i > cut]
        assert [e.event for e in replay] == types[3:]


def test_a_stream_resumed_after_the_end_closes_at_once(database_url: str) -> None:
    # A client reconnecting with the last id it saw, after the run ended: nothing is left
    # to send, and the stream ends instead of waiting for events that will never come (the
    # status the route read for its visibility check decides; on PostgreSQL a stream that
    # waited would only re-read after FOLLOW_RECHECK_S).
    deployment, bank = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        run_id = start(c)
        pending = wait_pending(c)
        c.post(f"/api/confirmations/{pending['id']}/respond", json={"decision": "approve"},
               headers=auth("alice"))
        assert wait_run(c, run_id)["status"] == "completed"
        with c.stream("GET", f"/api/runs/{run_id}/events", headers=auth("alice")) as resp:
            ids = [int(ev.id) for ev in read_events(resp) if not ev.comment and ev.id]
        assert ids == list(range(1, len(ids) + 1))
        began = time.monotonic()
        with c.stream("GET", f"/api/runs/{run_id}/events",
                      headers={**auth("alice"), "Last-Event-ID": str(ids[-1])}) as resp:
            assert resp.status_code == 200
            assert [ev for ev in read_events(resp) if not ev.comment] == []
        assert time.monotonic() - began < FOLLOW_RECHECK_S / 2
        assert len(bank.payments) == 1


def test_portal_and_openapi_are_served(database_url: str) -> None:
    deployment, _ = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        page = c.get("/")
        assert page.status_code == 200 and "hookgate" in page.text
        spec = c.get("/openapi.json").json()
        for path in ("/api/runs", "/api/runs/{run_id}", "/api/runs/{run_id}/events",
                     "/api/confirmations", "/api/confirmations/{request_id}",
                     "/api/confirmations/{request_id}/respond", "/api/hooks"):
            assert path in spec["paths"], path
        assert c.get("/api/hooks").status_code == 401
        hooks = c.get("/api/hooks", headers=auth("alice")).json()
        assert any(h["name"] == "approval_gate" and "feishu_gate" in h["aliases"]
                   for h in hooks)


def test_without_mcp_servers_the_gateway_is_absent_and_says_why(database_url: str) -> None:
    deployment, _ = world(database_url)
    assert not deployment.mcp_servers
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        for method, path in (("POST", "/mcp/buyer"), ("GET", "/mcp/buyer/"),
                             ("GET", "/api/mcp/servers")):
            r = c.request(method, path, headers=auth("alice"))
            assert r.status_code == 404, (path, r.text)
        assert "declares no mcp_servers" in c.post("/mcp/buyer", headers=auth("alice")).text
