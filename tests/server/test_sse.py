"""Server-Sent Events (server/sse.py): the wire format, and streams on a real server that
end when the client goes away or the server stops, dropping what they registered."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from typing import Any

import httpx
import pytest
from starlette.background import BackgroundTask

from hookgate.server.sse import Event, EventStreamResponse
from tests.live_server import live_server
from tests.server.demo_world import auth, world
from tests.sse import read_events


def fields(event: Event) -> list[str]:
    raw = event.encode().decode()
    assert raw.endswith("\r\n\r\n"), raw  # an event ends with an empty line
    return raw[:-4].split("\r\n")


def test_an_event_is_its_fields_then_an_empty_line() -> None:
    assert fields(Event('{"a": 1}', event="tool_call", id="7")) == [
        "id: 7", "event: tool_call", 'data: {"a": 1}']
    assert fields(Event("x")) == ["data: x"]
    assert fields(Event("")) == ["data: "]


def test_line_breaks_in_data_become_data_lines_and_nothing_else() -> None:
    assert fields(Event("a\nb\r\nc\rd")) == ["data: a", "data: b", "data: c", "data: d"]
    # Not line breaks in SSE: kept inside the line, so JSON text comes back unchanged.
    text = json.dumps({"s": "x\u2028y\u2029z\x85\x0b\x0c\x1c"}, ensure_ascii=False)
    (line,) = fields(Event(text))
    assert json.loads(line.removeprefix("data: ")) == {"s": "x\u2028y\u2029z\x85\x0b\x0c\x1c"}


def test_an_id_or_event_name_cannot_start_a_field_of_its_own() -> None:
    hostile = Event("d", event="x\nid: 999", id="1\r\ndata: injected")
    assert fields(hostile) == ["id: 1  data: injected", "event: x id: 999", "data: d"]


def test_a_lone_surrogate_is_written_as_its_json_escape() -> None:
    text = json.dumps({"s": "a\ud800b"}, ensure_ascii=False)
    raw = Event(text).encode()
    raw.decode("utf-8")  # valid UTF-8 on the wire
    assert json.loads(raw.decode()[len("data: "):-4]) == {"s": "a\ud800b"}


@pytest.mark.parametrize("ping_s", [0, -1, float("nan")])
def test_a_stream_needs_a_positive_ping_interval(ping_s: float) -> None:
    async def nothing() -> Any:
        yield Event("x")

    with pytest.raises(ValueError, match="ping_s"):
        EventStreamResponse(nothing(), ping_s=ping_s)


def watched(srv: Any, org: str = "acme") -> bool:
    async def check() -> bool:
        return srv.runtime.inbox.watched(org)  # type: ignore[no-any-return]

    return srv.call(check())  # type: ignore[no-any-return]


def wait_until(condition: Any, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def test_an_idle_stream_pings_and_a_client_gone_is_unsubscribed(tmp_path: Any) -> None:
    deployment, _ = world(f"sqlite+aiosqlite:///{tmp_path / 'h.db'}")
    with live_server(deployment, keepalive_s=0.1) as srv, \
            httpx.Client(base_url=srv.url, timeout=10) as c:
        with c.stream("GET", "/api/confirmations/events", headers=auth("alice")) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"] == "text/event-stream; charset=utf-8"
            assert resp.headers["cache-control"] == "no-store"
            for pings, ev in enumerate(read_events(resp), 1):
                assert ev.comment and ev.data == "ping"
                if pings == 2:
                    assert watched(srv)  # the stream is subscribed while it is read
                if pings == 3:
                    break
        # The client closed its connection: the stream ends and its subscription goes.
        wait_until(lambda: not watched(srv))


def test_a_server_stopping_ends_open_streams_cleanly_and_at_once(tmp_path: Any) -> None:
    deployment, _ = world(f"sqlite+aiosqlite:///{tmp_path / 'h.db'}")
    ended: dict[str, Any] = {}
    with live_server(deployment, keepalive_s=30) as srv:
        def follow() -> None:
            with httpx.Client(base_url=srv.url, timeout=30) as c, \
                    c.stream("GET", "/api/confirmations/events", headers=auth("alice")) as r:
                ended["status"] = r.status_code
                try:
                    ended["events"] = list(read_events(r))  # until the body ends
                    ended["clean"] = True
                except httpx.HTTPError as exc:  # a body cut off, not ended
                    ended["clean"] = exc
                ended["at"] = time.monotonic()

        reader = threading.Thread(target=follow)
        reader.start()
        wait_until(lambda: watched(srv))
        stopping = time.monotonic()
        srv.server.should_exit = True
        reader.join(10)
        srv.thread.join(10)
        assert not srv.thread.is_alive()
    assert ended["status"] == 200 and ended["clean"] is True and ended["events"] == []
    # Well within the server's grace period (2 s here), which a stream used to hold.
    assert ended["at"] - stopping < 1.5


class Wire:
    """The ASGI side of one request: what the response sent, and a disconnect on demand."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()
        self.streaming = asyncio.Event()  # the head and a first event went out
        self._first = True

    async def receive(self) -> dict[str, Any]:
        if self._first:
            self._first = False
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if len(self.sent) >= 2:
            self.streaming.set()

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])

    def ended(self) -> bool:
        return self.sent[-1] == {"type": "http.response.body", "body": b"",
                                 "more_body": False}


SCOPE: dict[str, Any] = {"type": "http", "method": "GET", "path": "/", "headers": []}


async def test_a_stream_ends_with_its_events_then_runs_its_background_task() -> None:
    after: list[bool] = []

    async def events() -> Any:
        yield Event("one", id="1")
        yield Event("two", id="2")

    async def background_task() -> None:
        after.append(wire.ended())

    wire = Wire()
    response = EventStreamResponse(events(), ping_s=30)
    response.background = BackgroundTask(background_task)
    await response(SCOPE, wire.receive, wire.send)
    assert wire.sent[0]["status"] == 200
    assert wire.body() == b"id: 1\r\ndata: one\r\n\r\nid: 2\r\ndata: two\r\n\r\n"
    assert after == [True]  # the background task ran once the body had ended


async def waiting_events(closed: list[str]) -> Any:
    """A first event, then a wait for ever (a run waiting for a person); notes its close."""
    try:
        yield Event("first")
        await asyncio.Event().wait()
        yield Event("never")
    finally:
        closed.append("closed")


async def streaming(events: Any) -> tuple[Wire, asyncio.Task[None]]:
    """A stream of ``events`` being served, once its head and first event went out."""
    wire = Wire()
    serving = asyncio.create_task(
        EventStreamResponse(events, ping_s=30)(SCOPE, wire.receive, wire.send))
    await asyncio.wait_for(wire.streaming.wait(), 5)
    return wire, serving


async def test_a_client_gone_closes_the_events_and_sends_nothing_more() -> None:
    closed: list[str] = []
    wire, serving = await streaming(waiting_events(closed))
    wire.gone.set()
    await asyncio.wait_for(serving, 5)  # returns: the disconnect is not an error
    assert closed == ["closed"] and not wire.ended()
    assert serving.cancelling() == 0  # the stream's own cancellation was taken back


async def test_events_that_swallow_the_cut_still_end_the_stream_cleanly() -> None:
    async def events() -> Any:
        yield Event("first")
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()

    wire, serving = await streaming(events())
    wire.gone.set()
    await asyncio.wait_for(serving, 5)
    assert serving.cancelling() == 0 and not serving.cancelled()


async def test_a_cancellation_from_outside_is_not_swallowed() -> None:
    closed: list[str] = []
    _, serving = await streaming(waiting_events(closed))
    serving.cancel()  # e.g. the server's grace period ran out
    with pytest.raises(asyncio.CancelledError):
        await serving
    assert closed == ["closed"]
