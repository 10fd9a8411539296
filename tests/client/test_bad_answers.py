"""``hookgate.client`` takes only a documented answer: a real loopback server answers a
redirect (with a verdict of ``allow`` in its body), a body that is not JSON, JSON that is not
an object, a verdict without a decision or with an unknown one, and fields of the wrong type;
each is a GuardAnswerInvalid naming what was wrong (a GuardUnavailable: the call does not
run), and a redirect is never followed, to this host or another."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from hookgate.client import (
    AsyncClient,
    Client,
    GuardAnswerInvalid,
    GuardRedirected,
    GuardUnavailable,
)
from tests.adversarial.conftest import Tally, attempt

__all__ = ["attempt"]


@dataclass
class Answering:
    """A loopback HTTP server that answers every request with ``status``, ``headers`` and
    ``body``, and counts the requests it got."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    requests: list[str] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def bad_server() -> Iterator[Answering]:
    yield from _serve()


@pytest.fixture
def elsewhere() -> Iterator[Answering]:
    """Another server a redirect points at: it must never be asked."""
    yield from _serve()


def _serve() -> Iterator[Answering]:
    answering = Answering()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            answering.requests.append(f"{self.command} {self.path}")
            self.send_response(answering.status)
            for name, value in answering.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(answering.body)))
            self.end_headers()
            self.wfile.write(answering.body)

        do_GET = do_POST = _answer

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    answering.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield answering
    finally:
        server.shutdown()
        server.server_close()


def answer(server: Answering, body: Any, *, status: int = 200,
           content_type: str = "application/json") -> None:
    server.status = status
    server.headers = {"Content-Type": content_type}
    server.body = body if isinstance(body, bytes) else json.dumps(body).encode()


ASK = {"agent": "payer", "session_id": "s", "call_id": "c", "tool": "transfer",
       "arguments": {"amount": 5}}
ALLOW = {"call": "gc_1", "decision": "allow", "arguments": {"amount": 5}, "note": None}

#: name -> (the server's answer to POST /api/v1/calls, what the error names)
BAD_VERDICTS: dict[str, tuple[Any, str]] = {
    "html": (b"<html>gateway</html>", "not JSON"),
    "empty body": (b"", "not JSON"),
    "a JSON list": ([ALLOW], "an array, not an object"),
    "a JSON string": ("allow", "a string, not an object"),
    "no decision": ({"call": "gc_1", "arguments": {}}, "no 'decision'"),
    "an unknown decision": ({**ALLOW, "decision": "maybe"}, "unknown decision 'maybe'"),
    "a decision of another type": ({**ALLOW, "decision": ["allow"]}, "'decision'"),
    "no call": ({"decision": "allow", "arguments": {}}, "'call'"),
    "a call that is a number": ({**ALLOW, "call": 7}, "'call'"),
    "arguments that are a list": ({**ALLOW, "arguments": [5]}, "'arguments'"),
    "no arguments": ({"call": "gc_1", "decision": "allow"}, "'arguments'"),
    "a note that is an object": ({**ALLOW, "note": {"x": 1}}, "'note'"),
    "a pending without a request": ({"call": "gc_1", "decision": "pending"}, "'request_id'"),
    "a denial whose reason is a number": ({"call": "gc_1", "decision": "deny", "reason": 3},
                                          "'reason'"),
    "already ran without an observation": ({"call": "gc_1", "decision": "already_ran"},
                                           "'observation'"),
}


@pytest.mark.parametrize("name", list(BAD_VERDICTS))
async def test_a_verdict_of_the_wrong_shape_is_an_error_naming_what_was_wrong(
        bad_server: Answering, name: str, attempt: Tally) -> None:
    body, named = BAD_VERDICTS[name]
    answer(bad_server, body)
    with Client(bad_server.url, "tok", framework="langgraph") as guard, \
            pytest.raises(GuardAnswerInvalid, match=named):
        guard.before_call(**ASK)
    async with AsyncClient(bad_server.url, "tok", framework="adk") as aguard:
        with pytest.raises(GuardAnswerInvalid, match=named) as raised:
            await aguard.before_call(**ASK)
    assert isinstance(raised.value, GuardUnavailable)  # adapters fail closed on it
    attempt.record(f"client: a verdict with {name}", raised.value is None)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirect_is_an_error_naming_where_it_points_and_is_never_followed(
        bad_server: Answering, elsewhere: Answering, status: int, attempt: Tally) -> None:
    # The redirect even carries a verdict of "allow" in its body.
    answer(elsewhere, ALLOW)
    answer(bad_server, ALLOW, status=status)
    bad_server.headers["Location"] = f"{elsewhere.url}/api/v1/calls"
    # A client the application built to follow redirects follows none either.
    following = httpx.Client(follow_redirects=True)
    with Client(bad_server.url, "tok", framework="crewai", http=following) as guard, \
            pytest.raises(GuardRedirected, match=f"HTTP {status}.*{elsewhere.url}") as sync:
        guard.before_call(**ASK)
    async with AsyncClient(bad_server.url, "tok", framework="adk",
                           http=httpx.AsyncClient(follow_redirects=True)) as aguard:
        with pytest.raises(GuardRedirected, match=elsewhere.url) as raised:
            await aguard.wait("gc_1", timeout=0)
    assert sync.value.location == f"{elsewhere.url}/api/v1/calls"
    assert isinstance(raised.value, GuardUnavailable)
    attempt.record(f"client: an HTTP {status} redirect carrying allow",
                   raised.value is None or bool(elsewhere.requests))
    assert elsewhere.requests == [] and len(bad_server.requests) == 2


#: name -> (method, its answer, what the error names)
BAD_OTHERS: dict[str, tuple[str, Any, str]] = {
    "a session without its id": ("start_session", {"context": None}, "'session_id'"),
    "a session whose context is a list": (
        "start_session", {"session_id": "s", "context": ["x"]}, "'context'"),
    "an observation whose withheld is text": (
        "report", {"call": "gc_1", "text": "ok", "withheld": "no"}, "'withheld'"),
    "an observation without text": ("report", {"call": "gc_1", "withheld": False}, "'text'"),
    "a decision whose approved is text": (
        "decision", {"call": "gc_1", "decision": "decided", "request_id": "r",
                     "approved": "yes"}, "'approved'"),
    "a decision answered with allow": ("decision", ALLOW, "'allow' where a decision"),
    "a success status that is not 200": ("report", b"", "HTTP 204"),
}


@pytest.mark.parametrize("name", list(BAD_OTHERS))
def test_sessions_observations_and_decisions_of_the_wrong_shape_are_errors(
        bad_server: Answering, name: str) -> None:
    method, body, named = BAD_OTHERS[name]
    answer(bad_server, body, status=204 if "204" in named else 200)
    calls = {"start_session": lambda g: g.start_session(agent="payer", session_id="s"),
             "report": lambda g: g.report("gc_1", output="ok"),
             "decision": lambda g: g.decision("gc_1", timeout=0)}
    with Client(bad_server.url, "tok", framework="langgraph") as guard, \
            pytest.raises(GuardAnswerInvalid, match=named):
        calls[method](guard)
