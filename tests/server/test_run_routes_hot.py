"""A run's routes answered without FastAPI's generic handler (server/hot_route.py: ``POST
/api/runs``, ``GET /api/runs/{id}`` and its event stream) answer every request exactly as
FastAPI's handler does, and as the same routes reached through FastAPI's
``include_router``: the same status, headers and body (an event stream's bytes), over a
real server on SQLite and PostgreSQL, for plain requests and each way one can be wrong (no
or a bad token, a token of another org, bodies that are not JSON, not an object, missing,
mistyped or unknown fields, another content type, an unknown agent or engine, a
Last-Event-ID that is not a number). A plain start and stream never reach FastAPI's
dependency solver; a start whose body does not validate does."""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hookgate.server import hot_route
from hookgate.server.routes import runs
from tests.conftest import migrated_database_url
from tests.hot_routes import Servers, served_both_ways
from tests.live_server import LiveServer
from tests.server.demo_world import TOKENS, world

JSON = "application/json"
#: A run that ends at once: the model answers without a tool call.
TURNS = [{"answer": "Nothing to buy."}]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def servers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Servers]:
    url = migrated_database_url(request, tmp_path_factory.mktemp("hot-runs"))
    other = migrated_database_url(request, tmp_path_factory.mktemp("included-runs"))
    with served_both_ways(lambda: world(url, turns=TURNS)[0],
                          lambda: world(other, turns=TURNS)[0]) as both:
        yield both


def headers(user: str | None = "alice", content_type: str | None = JSON,
            token: str | None = None) -> dict[str, str]:
    out = {}
    if user is not None:
        out["Authorization"] = f"Bearer {token or TOKENS[user]}"
    if content_type is not None:
        out["Content-Type"] = content_type
    return out


def dumped(body: Any) -> bytes:
    return json.dumps(body).encode()


START = {"agent_id": "buyer", "message": "buy nothing"}

#: name -> (headers, body) of a ``POST /api/runs``.
STARTS: dict[str, tuple[dict[str, str], bytes]] = {
    "plain start": (headers(), dumped(START)),
    "a conversation and an engine": (headers(), dumped(START | {"conversation_id": "c1",
                                                                "engine": "react"})),
    "no token": (headers(user=None), dumped(START)),
    "a bad token": (headers(token="nope"), dumped(START)),
    "a token of another org": (headers(user="mallory"), dumped(START)),
    "a Basic authorization": ({"Authorization": "Basic abc", "Content-Type": JSON},
                              dumped(START)),
    "invalid JSON": (headers(), b'{"agent_id": '),
    "not an object": (headers(), b"[1, 2]"),
    "an empty body": (headers(), b""),
    "a missing field": (headers(), dumped({"agent_id": "buyer"})),
    "a mistyped field": (headers(), dumped(START | {"message": 5})),
    "an empty message": (headers(), dumped(START | {"message": ""})),
    "an unknown field": (headers(), dumped(START | {"extra": 1})),
    "an unknown engine": (headers(), dumped(START | {"engine": "other"})),
    "an unknown agent": (headers(), dumped(START | {"agent_id": "nobody"})),
    "text/plain": (headers(content_type="text/plain"), dumped(START)),
    "no content type": (headers(content_type=None), dumped(START)),
    "json with a charset": (headers(content_type=f"{JSON}; charset=utf-8"), dumped(START)),
    "a lone surrogate in the message": (headers(), b'{"agent_id": "buyer", '
                                                   b'"message": "\\ud800"}'),
    "bytes that are not UTF-8": (headers(), b'{"agent_id": "buyer", "message": "\xff"}'),
    "JSON nested past the parser's depth": (headers(), b'{"agent_id": "buyer", "m": '
                                            + b"[" * 100_000 + b"]" * 100_000 + b"}"),
}

Answer = tuple[int, list[tuple[str, str]], bytes]


def _answer(response: httpx.Response) -> Answer:
    kept = [(k, v if k != "content-length" else "-") for k, v in response.headers.multi_items()
            if k not in ("date", "server")]
    return response.status_code, kept, re.sub(rb'"run_id":"[^"]+"', b'"run_id":"R"',
                                               response.content)


def _start(server: LiveServer, name: str) -> httpx.Response:
    sent_headers, body = STARTS[name]
    return httpx.post(server.url + "/api/runs", headers=sent_headers, content=body,
                      timeout=30)


@pytest.mark.parametrize("name", list(STARTS))
def test_each_start_is_answered_as_fastapis_handler_and_include_router_answer_it(
        servers: Servers, through_fastapis_handler: Any, name: str) -> None:
    fast = _answer(_start(servers.direct, name))
    assert _answer(_start(servers.included, name)) == fast
    through_fastapis_handler()
    assert _answer(_start(servers.direct, name)) == fast


def _finished_run(server: LiveServer) -> str:
    started = _start(server, "plain start")
    assert started.status_code == 200, started.text
    run_id: str = started.json()["run_id"]
    for _ in range(300):
        if httpx.get(f"{server.url}/api/runs/{run_id}", headers=headers(),
                     timeout=30).json()["status"] == "completed":
            return run_id
    raise AssertionError(f"run {run_id} did not complete")


#: name -> (path under the run, headers, query): each a GET of one finished run.
READS: dict[str, tuple[str, dict[str, str], dict[str, str]]] = {
    "the run": ("", headers(content_type=None), {}),
    "the run, with no token": ("", headers(user=None, content_type=None), {}),
    "the run, to another org": ("", headers(user="mallory", content_type=None), {}),
    "the run, to a member who is not an admin": ("", headers(user="bob", content_type=None),
                                                 {}),
    "the events": ("/events", headers(content_type=None), {}),
    "the events, with the token in the query": ("/events", {},
                                                {"access_token": TOKENS["alice"]}),
    "the events after the first": ("/events", headers(content_type=None) | {
        "Last-Event-ID": "1"}, {}),
    "the events after the first, by query": ("/events", headers(content_type=None),
                                             {"last_event_id": "1"}),
    "the events after a word": ("/events", headers(content_type=None) | {
        "Last-Event-ID": "one"}, {}),
    "the events, with no token": ("/events", {}, {}),
    "the events, with a bad token": ("/events", headers(token="nope", content_type=None), {}),
    "the events, to another org": ("/events", headers(user="mallory", content_type=None),
                                   {}),
    "the events, to a member who is not an admin": ("/events",
                                                    headers(user="bob", content_type=None),
                                                    {}),
}


def _read(server: LiveServer, run_id: str, name: str) -> Answer:
    under, sent_headers, query = READS[name]
    return _answer(httpx.get(f"{server.url}/api/runs/{run_id}{under}", headers=sent_headers,
                             params=query, timeout=30))


@pytest.fixture(scope="module")
def finished(servers: Servers) -> tuple[str, str]:
    """A finished run on each server (the direct one's, the included one's)."""
    return _finished_run(servers.direct), _finished_run(servers.included)


@pytest.mark.parametrize("name", list(READS))
def test_each_read_of_a_run_is_answered_as_fastapis_handler_answers_it(
        servers: Servers, finished: tuple[str, str], through_fastapis_handler: Any,
        name: str) -> None:
    direct_run, _ = finished
    fast = _read(servers.direct, direct_run, name)
    if READS[name][0] == "/events" and fast[0] == 200:
        assert b"event: done" in fast[2]
    through_fastapis_handler()
    assert _read(servers.direct, direct_run, name) == fast


@pytest.mark.parametrize("name", list(READS))
def test_each_read_of_an_unknown_run_is_answered_as_through_include_router(
        servers: Servers, name: str) -> None:
    direct = _read(servers.direct, "run_unknown", name)
    assert direct[0] in (401, 404, 422)
    assert _read(servers.included, "run_unknown", name) == direct


def _events(answer: Answer) -> list[tuple[str, str, dict[str, Any]]]:
    # A stream's events with what differs between two runs (ids, times) left out.
    out = []
    for block in answer[2].decode().split("\r\n\r\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\r\n") if line)
        if fields:
            data = json.loads(fields["data"])
            out.append((fields["id"], fields["event"], sorted(data)))
    return out  # type: ignore[return-value]


def test_a_runs_events_are_written_as_through_include_router(
        servers: Servers, finished: tuple[str, str]) -> None:
    direct_run, included_run = finished
    direct = _read(servers.direct, direct_run, "the events")
    included = _read(servers.included, included_run, "the events")
    assert direct[:2] == included[:2] and direct[0] == 200
    assert _events(direct) == _events(included) and len(_events(direct)) >= 2


def test_a_plain_start_and_stream_skip_fastapis_dependency_solver_and_a_bad_body_does_not(
        servers: Servers, solved_by_fastapi: collections.Counter[str]) -> None:
    solved = solved_by_fastapi
    server = servers.direct
    run_id = _finished_run(server)
    assert b"event: done" in _read(server, run_id, "the events")[2]
    assert solved == {}
    assert _start(server, "an unknown field").status_code == 422
    assert solved == {"/api/runs": 1}
    # A body that validates, without a token: refused by the dependency, as FastAPI calls it.
    assert _start(server, "no token").status_code == 401
    assert solved == {"/api/runs": 1}


def test_the_run_routes_are_the_apps_own_and_the_list_keeps_fastapis_handler(
        servers: Servers) -> None:
    routes = servers.direct.server.config.app.router.routes
    own = [r for r in routes if getattr(r, "endpoint", None) in
           {route.endpoint for route in runs.router.routes}]
    assert [r.path for r in own] == [r.path for r in runs.router.routes]
    fast = {(r.path, *sorted(r.methods)) for r in own if hot_route._fast_handler(r)}
    assert fast == {("/api/runs", "POST"), ("/api/runs/{run_id}", "GET"),
                    ("/api/runs/{run_id}/events", "GET")}
