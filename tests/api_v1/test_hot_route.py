"""The guarded-call API's POST routes answered without FastAPI's generic handler
(server/hot_route.py) answer every request exactly as FastAPI's handler does: the same
status, headers and body, over a real server on SQLite and PostgreSQL, for plain calls and
for each way a request can be wrong (no or a bad token, a framework header over its limit,
bodies that are not JSON, not an object, missing or mistyped fields, another content type,
an unknown agent or call, someone the token may not act for, a reused call id, NaN). A
plain ask and report never reach FastAPI's dependency solver; a wrong one does. The routes
on the app's own router (hot_route.on_the_app) answer each of those requests as the same
routes reached through FastAPI's ``include_router`` do."""

from __future__ import annotations

import collections
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import fastapi.routing
import httpx
import pytest

from hookgate.server import hot_route
from hookgate.server.routes import guarded_calls
from tests.api_v1.test_guarded_calls import ALICE, BOT, deployment
from tests.conftest import migrated_database_url
from tests.hot_routes import Servers, served_both_ways
from tests.live_server import LiveServer

JSON = "application/json"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def servers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Servers]:
    url = migrated_database_url(request, tmp_path_factory.mktemp("hot"))
    other = migrated_database_url(request, tmp_path_factory.mktemp("included"))
    with served_both_ways(lambda: deployment(url), lambda: deployment(other)) as both:
        yield both


@pytest.fixture(scope="module")
def server(servers: Servers) -> LiveServer:
    return servers.direct


def ask_body(n: str, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"agent": "payer", "session_id": f"s-{n}", "call_id": f"c-{n}",
                            "tool": "search", "arguments": {"query": "q"}}
    return body | changes


def headers(token: str | None = BOT, content_type: str | None = JSON,
            framework: str | None = "langgraph") -> dict[str, str]:
    out = {}
    if token is not None:
        out["Authorization"] = f"Bearer {token}"
    if content_type is not None:
        out["Content-Type"] = content_type
    if framework is not None:
        out["X-Hookgate-Framework"] = framework
    return out


def dumped(body: Any) -> bytes:
    return json.dumps(body).encode()


#: name -> (path, headers, body): ``{n}`` is a fresh id for each of the two runs.
CASES: dict[str, tuple[str, dict[str, str], bytes]] = {
    "plain ask": ("/api/v1/calls", headers(), dumped(ask_body("{n}"))),
    "a gated ask": ("/api/v1/calls", headers(),
                    dumped(ask_body("{n}", tool="transfer", arguments={"to": "x"}))),
    "no token": ("/api/v1/calls", headers(token=None), dumped(ask_body("{n}"))),
    "a bad token": ("/api/v1/calls", headers(token="nope"), dumped(ask_body("{n}"))),
    "a framework over its limit": ("/api/v1/calls", headers(framework="f" * 65),
                                   dumped(ask_body("{n}"))),
    "no framework": ("/api/v1/calls", headers(framework=None), dumped(ask_body("{n}"))),
    "a framework header in lower case": ("/api/v1/calls",
                                         {**headers(framework=None),
                                          "x-hookgate-framework": "crewai"},
                                         dumped(ask_body("{n}"))),
    "an empty framework header": ("/api/v1/calls", headers(framework=""),
                                  dumped(ask_body("{n}"))),
    "invalid JSON": ("/api/v1/calls", headers(), b'{"agent": '),
    "not an object": ("/api/v1/calls", headers(), b"[1, 2]"),
    "an empty body": ("/api/v1/calls", headers(), b""),
    "a missing field": ("/api/v1/calls", headers(),
                        dumped({k: v for k, v in ask_body("{n}").items() if k != "tool"})),
    "a mistyped field": ("/api/v1/calls", headers(), dumped(ask_body("{n}", arguments=[1]))),
    "a call id over its limit": ("/api/v1/calls", headers(),
                                 dumped(ask_body("{n}", call_id="c" * 101))),
    "text/plain": ("/api/v1/calls", headers(content_type="text/plain"),
                   dumped(ask_body("{n}"))),
    "no content type": ("/api/v1/calls", headers(content_type=None), dumped(ask_body("{n}"))),
    "json with a charset": ("/api/v1/calls", headers(content_type=f"{JSON}; charset=utf-8"),
                            dumped(ask_body("{n}"))),
    "an unknown agent": ("/api/v1/calls", headers(), dumped(ask_body("{n}", agent="nobody"))),
    "acting for someone not allowed": ("/api/v1/calls", headers(),
                                       dumped(ask_body("{n}", acts_for="alice"))),
    "NaN in the arguments": ("/api/v1/calls", headers(),
                             b'{"agent": "payer", "session_id": "s-{n}", "call_id": "c-{n}", '
                             b'"tool": "search", "arguments": {"x": NaN}}'),
    "JSON nested past the parser's depth": ("/api/v1/calls", headers(),
                                           b'{"agent": "payer", "arguments": '
                                           + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    "a lone surrogate in the arguments": ("/api/v1/calls", headers(),
                                          b'{"agent": "payer", "session_id": "s-{n}", '
                                          b'"call_id": "c-{n}", "tool": "search", '
                                          b'"arguments": {"x": "\\ud800"}}'),
    "bytes that are not UTF-8": ("/api/v1/calls", headers(),
                                 b'{"agent": "payer", "session_id": "s-{n}", "call_id": '
                                 b'"c-{n}", "tool": "search", "arguments": {"x": "\xff"}}'),
    "a report of an unknown call": ("/api/v1/calls/gc_{n}/result", headers(),
                                    dumped({"output": "x"})),
    "a report with a mistyped error": ("/api/v1/calls/gc_{n}/result", headers(),
                                       dumped({"output": "x", "error": 5})),
    "a session": ("/api/v1/sessions", headers(), dumped({"agent": "payer",
                                                          "session_id": "s-{n}"})),
    "a session of an unknown agent": ("/api/v1/sessions", headers(),
                                      dumped({"agent": "nobody", "session_id": "s-{n}"})),
}


def _answer(response: httpx.Response, n: str) -> tuple[int, list[tuple[str, str]], str]:
    kept = [(k, v) for k, v in response.headers.multi_items() if k not in ("date", "server")]
    text = re.sub(r"(gc|cr)_[0-9A-Za-z_-]+", r"\1_X", response.text.replace(n, "N"))
    kept = [(k, v if k != "content-length" else "-") for k, v in kept]
    return response.status_code, kept, text


def _send(server: LiveServer, path: str, sent_headers: dict[str, str], body: bytes,
          n: str) -> httpx.Response:
    return httpx.post(server.url + path.replace("{n}", n), headers=sent_headers,
                      content=body.replace(b"{n}", n.encode()), timeout=30)


@pytest.mark.parametrize("name", list(CASES))
def test_each_request_is_answered_as_fastapis_handler_answers_it(
        server: LiveServer, through_fastapis_handler: Any, name: str) -> None:
    path, sent_headers, body = CASES[name]
    fast_n, slow_n = uuid.uuid4().hex[:12], uuid.uuid4().hex[:12]
    fast = _answer(_send(server, path, sent_headers, body, fast_n), fast_n)
    through_fastapis_handler()
    assert _answer(_send(server, path, sent_headers, body, slow_n), slow_n) == fast


def _ask_report_reuse(server: LiveServer, n: str) -> list[tuple[int, list[tuple[str, str]], str]]:
    asked = _send(server, "/api/v1/calls", headers(), dumped(ask_body("{n}")), n)
    call = asked.json()["call"]
    reported = _send(server, f"/api/v1/calls/{call}/result", headers(),
                     dumped({"output": {"rows": [1, 2]}}), n)
    again = _send(server, f"/api/v1/calls/{call}/result", headers(),
                  dumped({"output": "other"}), n)
    reused = _send(server, "/api/v1/calls", headers(),
                   dumped(ask_body("{n}", arguments={"query": "other"})), n)
    return [_answer(r, n) for r in (asked, reported, again, reused)]


def test_a_report_and_a_reused_call_id_are_answered_as_fastapis_handler_answers_them(
        server: LiveServer, through_fastapis_handler: Any) -> None:
    fast = _ask_report_reuse(server, uuid.uuid4().hex[:12])
    through_fastapis_handler()
    assert _ask_report_reuse(server, uuid.uuid4().hex[:12]) == fast


def _guarded_call_routes(server: LiveServer) -> tuple[list[Any], list[Any]]:
    """The app's own routes of the guarded-call API, and its inclusions of that router."""
    routes = server.server.config.app.router.routes
    own = [r for r in routes if getattr(r, "endpoint", None) in
           {route.endpoint for route in guarded_calls.router.routes}]
    included = [r for r in routes if getattr(r, "original_router", None) is guarded_calls.router]
    return own, included


@pytest.mark.parametrize("name", list(CASES))
def test_each_request_is_answered_as_through_fastapis_include_router(
        servers: Servers, name: str) -> None:
    own, included = _guarded_call_routes(servers.direct)
    assert len(own) == len(guarded_calls.router.routes) and not included
    own, included = _guarded_call_routes(servers.included)
    assert not own and len(included) == 1
    path, sent_headers, body = CASES[name]
    direct_n, included_n = uuid.uuid4().hex[:12], uuid.uuid4().hex[:12]
    direct = _answer(_send(servers.direct, path, sent_headers, body, direct_n), direct_n)
    assert _answer(_send(servers.included, path, sent_headers, body, included_n),
                   included_n) == direct


def test_a_report_and_a_reused_call_id_are_answered_as_through_fastapis_include_router(
        servers: Servers) -> None:
    assert _ask_report_reuse(servers.direct, uuid.uuid4().hex[:12]) == \
        _ask_report_reuse(servers.included, uuid.uuid4().hex[:12])


def test_a_plain_ask_and_report_skip_fastapis_dependency_solver_and_a_wrong_one_does_not(
        server: LiveServer, solved_by_fastapi: collections.Counter[str]) -> None:
    solved = solved_by_fastapi
    n = uuid.uuid4().hex[:12]
    asked = _send(server, "/api/v1/calls", headers(), dumped(ask_body("{n}")), n)
    assert asked.json()["decision"] == "allow"
    call = asked.json()["call"]
    reported = _send(server, f"/api/v1/calls/{call}/result", headers(),
                     dumped({"output": "x"}), n)
    assert reported.status_code == 200
    assert solved == {}
    wrong = _send(server, "/api/v1/calls", headers(), dumped(ask_body("{n}", tool="")), n)
    assert wrong.status_code == 422
    assert solved == {"/api/v1/calls": 1}
    # The audit shows the calls as any other's (read through the core API).
    audit = httpx.get(f"{server.url}/api/audit", params={"limit": 5},
                      headers={"Authorization": f"Bearer {ALICE}"})
    assert audit.status_code == 200


def test_the_hot_routes_read_their_parameters_and_bodies_as_worked_out_once() -> None:
    # Each POST route's path parameter, framework header and body are read by the readers
    # resolved from FastAPI's own answers once, not by FastAPI's generic functions (which
    # a FastAPI without those functions would keep: decision record 0038).
    posts = [r for r in guarded_calls.router.routes
             if isinstance(r, fastapi.routing.APIRoute) and r.methods == {"POST"}]
    assert {r.path for r in posts} == {"/api/v1/sessions", "/api/v1/calls",
                                       "/api/v1/calls/{call}/result"}
    for route in posts:
        dependant = route.dependant
        assert dependant.header_params
        for fields in (dependant.path_params, dependant.header_params):
            assert hot_route._params_reader(fields).__name__ == "read"
        assert hot_route._body_reader(dependant.body_params).__name__ == "read"


@pytest.mark.parametrize(("method", "path"), [
    ("PUT", "/api/v1/calls"), ("GET", "/api/v1/calls/gc_{n}/result"),
    ("DELETE", "/api/v1/sessions"), ("GET", "/api/v1/calls/gc_{n}"),
    ("GET", "/api/v1/calls/gc_{n}?wait=soon"), ("GET", "/api/v1/calls/gc_{n}/events"),
    ("POST", "/api/v1/calls/"), ("GET", "/api/v1/call")])
def test_other_methods_paths_and_the_get_routes_are_answered_as_through_include_router(
        servers: Servers, method: str, path: str) -> None:
    def answer(server: LiveServer, n: str) -> tuple[int, list[tuple[str, str]], str]:
        response = httpx.request(method, server.url + path.replace("{n}", n),
                                 headers=headers(), follow_redirects=False, timeout=30)
        status, kept, text = _answer(response, n)
        return status, [(k, v.replace(server.url, "URL")) for k, v in kept], text

    direct_n, included_n = uuid.uuid4().hex[:12], uuid.uuid4().hex[:12]
    direct = answer(servers.direct, direct_n)
    assert direct[0] in (307, 404, 405, 422)
    assert answer(servers.included, included_n) == direct


#: name -> (headers, query) of ``GET /api/v1/calls/{call}/events`` for an asked call.
CALL_EVENTS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "the events of an asked call": (headers(content_type=None), {}),
    "with the token in the query": (headers(token=None, content_type=None),
                                    {"access_token": BOT}),
    "with no token": (headers(token=None, content_type=None), {}),
    "with a bad token": (headers(token="nope", content_type=None), {}),
    "with a framework over its limit": (headers(content_type=None, framework="f" * 65), {}),
    "with no framework": (headers(content_type=None, framework=None), {}),
}


@pytest.mark.parametrize("name", list(CALL_EVENTS))
def test_a_calls_event_stream_is_answered_as_fastapis_handler_answers_it(
        server: LiveServer, through_fastapis_handler: Any, name: str) -> None:
    n = uuid.uuid4().hex[:12]
    call = _send(server, "/api/v1/calls", headers(), dumped(ask_body("{n}")), n).json()["call"]
    sent_headers, query = CALL_EVENTS[name]

    def answer(path: str) -> tuple[int, list[tuple[str, str]], str]:
        return _answer(httpx.get(server.url + path, headers=sent_headers, params=query,
                                 timeout=30), n)

    fast = answer(f"/api/v1/calls/{call}/events"), answer("/api/v1/calls/gc_unknown/events")
    assert fast[0][0] in (200, 401, 422) and fast[1][0] in (401, 404, 422)
    if name == "the events of an asked call":
        assert fast[0][0] == 200 and "event: " in fast[0][2]
    through_fastapis_handler()
    assert (answer(f"/api/v1/calls/{call}/events"),
            answer("/api/v1/calls/gc_unknown/events")) == fast
