"""Hostile HTTP/1.1 on the wire, against the real server (uvicorn with httptools and
hookgate's bound on a request's head, server/http_protocol.py): malformed and ambiguous
requests are refused before any application code runs, a head over 16 KiB gets a 431
whether it ends or not, and well-formed requests (pipelined, or with a head just under the
bound) are served as before."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from hookgate.server.http_protocol import MAX_HEAD_BYTES
from tests.live_server import LiveServer, live_server
from tests.server.demo_world import TOKENS, auth, world

TOKEN = TOKENS["alice"].encode()


def exchange(port: int, data: bytes, *, wait_s: float = 5.0) -> bytes:
    """Send ``data`` on a fresh connection; everything the server answers until it closes
    (or ``wait_s`` passes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as s:
        s.sendall(data)
        out = b""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            out += chunk
        return out


def status(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:80]
    return int(answer[9:12])


def runs_of_alice(srv: LiveServer) -> list[object]:
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        r = c.get("/api/runs", headers=auth("alice"))
        assert r.status_code == 200
        return list(r.json())


MALFORMED = {
    "not HTTP": b"GARBAGE\r\n\r\n",
    "NUL in a header": b"GET /api/runs HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
    "non-ASCII target": b"GET /api/runs/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n",
    "length not a number": b"POST /api/runs HTTP/1.1\r\nHost: x\r\nContent-Length: ab\r\n\r\n",
    "two lengths": b"POST /api/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN
                   + b"\r\nContent-Length: 2\r\nContent-Length: 45\r\n\r\n{}",
    # Request smuggling: a body framed two ways. A server that picked one framing and a
    # proxy the other would disagree on where the next request begins.
    "length and chunked": b"POST /api/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                          + TOKEN + b"\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 45\r\nTransfer-Encoding: chunked\r\n\r\n"
                          b"0\r\n\r\n{\"agent_id\": \"buyer\", \"message\": \"pay\"}",
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_and_ambiguous_requests_are_refused_before_the_app(database_url: str,
                                                                      name: str) -> None:
    deployment, bank = world(database_url)
    with live_server(deployment) as srv:
        answer = exchange(srv.port, MALFORMED[name])
        assert status(answer) == 400
        assert b"connection: close" in answer.lower()
        assert runs_of_alice(srv) == []  # nothing of it ran
        assert bank.payments == []


def test_a_head_over_the_bound_gets_431_whether_it_ends_or_not(database_url: str) -> None:
    deployment, _ = world(database_url)
    with live_server(deployment) as srv:
        line = b"GET /api/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN + b"\r\n"
        # One header far over the bound, sent at once (most of it still unread when the
        # server answers: the answer must not be lost to a reset connection).
        huge = exchange(srv.port, line + b"X-Big: " + b"a" * 200_000 + b"\r\n\r\n")
        assert status(huge) == 431
        # Many small headers adding up to just over the bound: measured exactly.
        many = b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 90) for i in range(MAX_HEAD_BYTES // 90))
        assert status(exchange(srv.port, line + many + b"\r\n")) == 431
        # A header that never ends: cut off once the bound is held, not waited for.
        began = time.monotonic()
        endless = exchange(srv.port, line + b"X-Endless: " + b"b" * (MAX_HEAD_BYTES + 10))
        assert status(endless) == 431
        assert time.monotonic() - began < 4
        # A URL over the bound.
        assert status(exchange(srv.port, b"GET /api/runs?q=" + b"c" * (MAX_HEAD_BYTES + 1)
                               + b" HTTP/1.1\r\nHost: x\r\n\r\n")) == 431
        assert runs_of_alice(srv) == []  # and the server goes on serving


def test_well_formed_requests_are_served_pipelined_and_just_under_the_bound(
        database_url: str) -> None:
    deployment, _ = world(database_url)
    with live_server(deployment) as srv:
        get = b"GET /api/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN + b"\r\n"
        filler = b"X-Filler: " + b"f" * (MAX_HEAD_BYTES - len(get) - 200) + b"\r\n"
        answer = exchange(srv.port, get + filler + b"Connection: close\r\n\r\n")
        assert status(answer) == 200 and answer.endswith(b"[]")
        two = exchange(srv.port, get + b"\r\n" + get + b"Connection: close\r\n\r\n")
        assert two.count(b"HTTP/1.1 200 OK") == 2
        refused = exchange(srv.port, b"GET /api/runs HTTP/1.1\r\nHost: x\r\n"
                                     b"Connection: close\r\n\r\n")
        assert status(refused) == 401
