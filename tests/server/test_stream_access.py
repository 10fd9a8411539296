"""Event streams last only while their caller may see them: a token revoked, a user disabled
(removed from the configuration) or moved to another org ends the inbox stream and a run's
event stream, and nothing that happens after the revocation reaches them — on a real server,
SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from typing import Any

import httpx
import pytest

from hookgate import ScriptedLLM
from hookgate.runtime.deployment import Deployment, UserSpec
from hookgate.storage.users import sync_declared_users
from tests.adversarial_tally import TALLY
from tests.live_server import LiveServer, live_server
from tests.server.demo_world import TOKENS, auth, world
from tests.server.test_sse import wait_until

pytestmark = pytest.mark.both_databases

#: Long enough for a slow shared machine, far beyond the re-check interval (2 s + the token
#: cache's 2 s).
ENDS_WITHIN_S = 20.0


class OpenStream:
    """An SSE stream read in a thread: its raw lines, and whether it ended."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.lines: list[str] = []
        self.status: int | None = None
        self.opened = threading.Event()
        self.ended = threading.Event()
        self._client = httpx.Client(timeout=httpx.Timeout(10, read=120))
        self._thread = threading.Thread(target=self._read, args=(url, headers), daemon=True)
        self._thread.start()
        assert self.opened.wait(10) and self.status == 200, self.status

    def _read(self, url: str, headers: dict[str, str]) -> None:
        try:
            with self._client.stream("GET", url, headers=headers) as resp:
                self.status = resp.status_code
                self.opened.set()
                for line in resp.iter_lines():
                    self.lines.append(line)
        except httpx.HTTPError:
            pass
        finally:
            self.opened.set()
            self.ended.set()

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def close(self) -> None:
        self._client.close()


def paying(database_url: str) -> tuple[Deployment, dict[str, str], Any]:
    """The demo world, approvals by any org member, each run paying ``vendor["next"]``."""
    deployment, bank = world(database_url, scope="org_members")
    vendor = {"next": "nobody"}

    def model_for(_agent_id: str) -> ScriptedLLM:
        return ScriptedLLM([
            {"tool_calls": [{"name": "oa__purchase_pay",
                             "args": {"amount": 60000, "vendor": vendor["next"]}}]},
            {"answer": "Paid."}])

    return dataclasses.replace(deployment, model_for=model_for), vendor, bank


def start_run(c: httpx.Client, vendor: dict[str, str], name: str) -> str:
    vendor["next"] = name
    r = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
               headers=auth("olivia"))
    assert r.status_code == 200, r.text
    return str(r.json()["run_id"])


def pending_for(c: httpx.Client, name: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        r = c.get("/api/confirmations", params={"status": "pending"}, headers=auth("alice"))
        return next((q for q in r.json() if q["payload"]["args"].get("vendor") == name), None)

    wait_until(lambda: found() is not None, timeout=30)
    request = found()
    assert request is not None
    return request


def revoke_bob(c: httpx.Client) -> None:
    r = c.post("/api/users/bob/revoke", headers=auth("alice"))
    assert r.status_code == 200 and r.json()["revoked"], r.text


def change_bob(srv: LiveServer, deployment: Deployment, how: str) -> None:
    """What a restart with an edited configuration does to bob: ``removed`` from it (he is
    disabled) or ``moved`` to the org Other."""
    users: list[UserSpec] = []
    for u in deployment.users:
        if u.id != "bob":
            users.append(u)
        elif how == "moved":
            users.append(dataclasses.replace(u, org="other"))
    srv.call(sync_declared_users(srv.runtime.db, users))


@pytest.mark.parametrize("recheck_s", [None, 60.0],
                         ids=["default-recheck", "before-the-timer-asks"])
def test_an_inbox_stream_whose_token_is_revoked_ends_and_never_shows_the_next_request(
        database_url: str, recheck_s: float | None) -> None:
    # With a re-check a minute away, the next event itself is refused: the token cache that
    # every route asks was cleared by the revocation.
    deployment, vendor, _bank = paying(database_url)
    before, after = f"before-{uuid.uuid4().hex}", f"after-{uuid.uuid4().hex}"
    with live_server(deployment, access_recheck_s=recheck_s) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as c:
        stream = OpenStream(f"{srv.url}/api/confirmations/events", auth("bob"))
        try:
            start_run(c, vendor, before)
            wait_until(lambda: before in stream.text, timeout=30)  # the stream delivers
            revoke_bob(c)
            start_run(c, vendor, after)
            pending_for(c, after)
            if recheck_s is None:
                assert stream.ended.wait(ENDS_WITHIN_S), "the stream outlived the revocation"
            else:
                # One more change of the org's requests (a rejection) after the new one.
                r = c.post(f"/api/confirmations/{pending_for(c, before)['id']}/respond",
                           json={"decision": "reject"}, headers=auth("alice"))
                assert r.status_code == 200, r.text
                assert stream.ended.wait(ENDS_WITHIN_S), "the stream outlived the revocation"
        finally:
            stream.close()
        leaked = after in stream.text
        TALLY.record(f"inbox stream after revocation ({recheck_s=})", leaked)
        assert not leaked, stream.text
        again = c.get("/api/confirmations/events", headers=auth("bob"))
        assert again.status_code == 401


def test_a_run_stream_whose_token_is_revoked_shows_nothing_of_the_runs_later_steps(
        database_url: str) -> None:
    deployment, vendor, bank = paying(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        run_id = start_run(c, vendor, "ACME")
        stream = OpenStream(f"{srv.url}/api/runs/{run_id}/events", auth("bob"))
        try:
            wait_until(lambda: "confirmation_pending" in stream.text, timeout=30)
            revoke_bob(c)
            request = pending_for(c, "ACME")
            r = c.post(f"/api/confirmations/{request['id']}/respond",
                       json={"decision": "approve"}, headers=auth("alice"))
            assert r.status_code == 200, r.text
            wait_until(lambda: c.get(f"/api/runs/{run_id}", headers=auth("alice")
                                     ).json()["status"] == "completed", timeout=30)
            assert stream.ended.wait(ENDS_WITHIN_S), "the stream outlived the revocation"
        finally:
            stream.close()
        assert bank.payments == [{"amount": 60000, "vendor": "ACME"}]
        leaked = any(word in stream.text for word in
                     ("confirmation_resolved", "tool_result", "paid 60000", "Paid."))
        TALLY.record("run stream after revocation", leaked)
        assert not leaked, stream.text
        assert c.get(f"/api/runs/{run_id}/events", headers=auth("bob")).status_code == 401


@pytest.mark.parametrize("how", ["removed", "moved"])
def test_a_user_removed_from_the_configuration_or_moved_away_loses_both_open_streams(
        database_url: str, how: str) -> None:
    deployment, vendor, _bank = paying(database_url)
    after = f"after-{uuid.uuid4().hex}"
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        run_id = start_run(c, vendor, "ACME")
        pending_for(c, "ACME")
        inbox = OpenStream(f"{srv.url}/api/confirmations/events", auth("bob"))
        run = OpenStream(f"{srv.url}/api/runs/{run_id}/events", auth("bob"))
        try:
            wait_until(lambda: "confirmation_pending" in run.text, timeout=30)
            change_bob(srv, deployment, how)
            assert inbox.ended.wait(ENDS_WITHIN_S), f"the inbox stream outlived '{how}'"
            assert run.ended.wait(ENDS_WITHIN_S), f"the run stream outlived '{how}'"
            start_run(c, vendor, after)
            pending_for(c, after)
        finally:
            inbox.close()
            run.close()
        leaked = after in inbox.text
        TALLY.record(f"inbox stream of a user {how}", leaked)
        assert not leaked
        # Reconnecting does not bring the org's runs back either.
        status = c.get(f"/api/runs/{run_id}/events", headers=auth("bob")).status_code
        assert status == (401 if how == "removed" else 404)


def test_how_often_streams_ask_again_is_the_server_sections_access_recheck_s(
        tmp_path: Any) -> None:
    from hookgate.runtime.deployment import deployment_from_config
    from tests.config.test_config import MINIMAL, load, load_error

    cfg = load(tmp_path, MINIMAL + "server: {access_recheck_s: 0.5}\n")
    assert deployment_from_config(cfg).access_recheck_s == 0.5
    assert deployment_from_config(load(tmp_path, MINIMAL)).access_recheck_s == 2.0
    for bad in ("0", "-1", ".nan", "3600"):
        error = load_error(tmp_path, MINIMAL + f"server: {{access_recheck_s: {bad}}}\n")
        assert "access_recheck_s" in str(error)


def test_a_live_runs_stream_is_its_orgs_alone_even_served_from_memory(
        database_url: str) -> None:
    # A run waiting for a person is live in this process (on SQLite its stream replays the
    # run's feed in memory). Another org's user gets 404 for it, as for a run that has
    # ended; its own org's user gets its events.
    deployment, vendor, _bank = paying(database_url)
    name = f"live-{uuid.uuid4().hex}"
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        run_id = start_run(c, vendor, name)
        pending_for(c, name)
        live = run_id in srv.runtime.runs.bus.feeds
        if srv.runtime.runs.bus.followers is None:
            assert live, "the waiting run's feed is in memory"
        # The stream takes its token in the query too; the run's page only in the header.
        for path, hows in ((f"/api/runs/{run_id}/events", ("header", "query")),
                           (f"/api/runs/{run_id}", ("header",))):
            for how in hows:
                sent = {"headers": auth("mallory")} if how == "header" else {
                    "params": {"access_token": TOKENS["mallory"]}}
                with c.stream("GET", path, **sent) as got:  # a stream it opened stays open
                    text = got.read().decode() if got.status_code != 200 else ""
                leaked = got.status_code != 404 or name in text
                TALLY.record(f"another org reads a live run ({path.rsplit('/', 1)[-1]}, "
                             f"{how})", leaked)
                assert not leaked, (path, how, got.status_code)
        stream = OpenStream(f"{srv.url}/api/runs/{run_id}/events", auth("olivia"))
        try:
            wait_until(lambda: "confirmation_pending" in stream.text, timeout=30)
        finally:
            stream.close()
