"""A response of known length leaves the server in one write, its head with its body
(server/http_protocol.py, ``HeadWithBody``); a streamed response is written once per turn
of the event loop (what it sent in that turn, in order, never held for a later turn); a
``HEAD`` answer and an interim ``100 Continue`` are written as they come. Driven through
the real protocol (httptools' parser, uvicorn's request cycle) over a transport that
records its writes."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from uvicorn.server import ServerState

from hookgate.server.http_protocol import STREAM_HELD_BYTES, HeadWithBody
from hookgate.server.serving import uvicorn_config

#: Set by a test, awaited by ``/slow-stream`` between its two parts.
RELEASE: dict[str, asyncio.Event] = {}


class RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(
            name, default)


class FullSocket(RecordingTransport):
    """Takes every write into its buffer and nothing out while ``full``: over 64 KiB it
    pauses its protocol, as asyncio's transports do."""

    full = True
    protocol: Any = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        super().write(data)
        if self.full and sum(map(len, self.writes)) > 65_536:
            self.protocol.pause_writing()


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``/sized``: a body of known length in two parts; ``/stream``: a chunked body;
    ``/empty``: content-length 0; ``/fails``: starts a sized answer, then fails."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    path = scope["path"]
    if path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"one", "more_body": True})
        await send({"type": "http.response.body", "body": b"two"})
        return
    if path == "/slow-stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"one", "more_body": True})
        await RELEASE["slow"].wait()
        await send({"type": "http.response.body", "body": b"two"})
        return
    if path == "/long":  # 2 MiB in parts of 16 KiB, as fast as the app may send them
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(128):
            await send({"type": "http.response.body", "body": b"x" * 16_384,
                        "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    if path == "/burst":  # three parts of 40 KiB in one turn: over the held bound
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for part in (b"a", b"b", b"c"):
            await send({"type": "http.response.body", "body": part * 40_960,
                        "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    length = b"0" if path == "/empty" else b"7"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", length)]})
    if path == "/fails":
        raise RuntimeError("the app failed after starting its answer")
    if path == "/empty":
        await send({"type": "http.response.body", "body": b""})
        return
    await send({"type": "http.response.body", "body": b"abc", "more_body": True})
    await send({"type": "http.response.body", "body": b"defg"})


def connected(transport: RecordingTransport) -> Any:
    """hookgate serve's HTTP protocol for ``app``, its connection made over ``transport``."""
    config = uvicorn_config(app, "127.0.0.1", 0)
    config.load()
    protocol = config.http_protocol_class(config=config, server_state=ServerState(),
                                          app_state={})
    protocol.connection_made(transport)
    return protocol


async def served(request: bytes) -> RecordingTransport:
    transport = RecordingTransport()
    protocol = connected(transport)
    protocol.data_received(request)
    for _ in range(50):
        await asyncio.sleep(0)
        if protocol.cycle is not None and (protocol.cycle.response_complete
                                           or transport.closed):
            break
    await asyncio.gather(*protocol.tasks)
    protocol.connection_lost(None)
    return transport


def request(method: str, path: str, *extra: bytes) -> bytes:
    return (f"{method} {path} HTTP/1.1\r\nHost: x\r\n".encode() + b"".join(extra)
            + b"\r\n")


def test_a_response_of_known_length_is_one_write_of_its_head_and_first_part() -> None:
    writes = asyncio.run(served(request("GET", "/sized"))).writes
    assert len(writes) == 2  # the head with the first part, then the second part
    assert writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert writes[0].endswith(b"\r\n\r\nabc")
    assert writes[1] == b"defg"


def test_an_empty_response_writes_its_head_at_once() -> None:
    writes = [w for w in asyncio.run(served(request("GET", "/empty"))).writes if w]
    assert len(writes) == 1  # (uvicorn writes the empty body too: a transport drops it)
    assert writes[0].startswith(b"HTTP/1.1 200 OK\r\n") and writes[0].endswith(b"\r\n\r\n")


def test_a_stream_sent_in_one_turn_is_one_write_of_its_head_parts_and_end() -> None:
    writes = asyncio.run(served(request("GET", "/stream"))).writes
    assert len(writes) == 1
    head, body = writes[0].split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"transfer-encoding: chunked" in head
    assert body == b"3\r\none\r\n3\r\ntwo\r\n0\r\n\r\n"


def test_a_streams_part_goes_out_in_its_own_turn_not_held_for_the_next_part() -> None:
    async def scenario() -> list[bytes]:
        RELEASE["slow"] = asyncio.Event()
        transport = RecordingTransport()
        protocol = connected(transport)
        protocol.data_received(request("GET", "/slow-stream"))
        for _ in range(20):  # the app waits for the release: its first turn's write is out
            await asyncio.sleep(0)
        first = list(transport.writes)
        RELEASE["slow"].set()
        await asyncio.gather(*protocol.tasks)
        await asyncio.sleep(0)
        protocol.connection_lost(None)
        assert len(first) == 1, first
        assert first[0].endswith(b"\r\n\r\n3\r\none\r\n")
        return transport.writes

    writes = asyncio.run(scenario())
    assert writes[1:] == [b"3\r\ntwo\r\n0\r\n\r\n"]


def test_a_streams_burst_over_the_bound_is_written_as_it_reaches_it() -> None:
    writes = asyncio.run(served(request("GET", "/burst"))).writes
    assert len(writes) == 2
    _, first = writes[0].split(b"\r\n\r\n", 1)
    # The head and two parts (80 KiB, over the 64 KiB bound) at once; the third with the end.
    assert first == b"a000\r\n" + b"a" * 40_960 + b"\r\n" + b"a000\r\n" + b"b" * 40_960 + b"\r\n"
    assert writes[1] == b"a000\r\n" + b"c" * 40_960 + b"\r\n0\r\n\r\n"
    assert 2 * 40_960 >= STREAM_HELD_BYTES > 40_960


def test_a_stream_whose_reader_is_slow_is_paused_by_the_transports_flow_control() -> None:
    """A stream sent faster than its reader takes it holds at most the bound before the
    transport sees it, so the transport's high-water mark still pauses the app's sends."""
    async def scenario() -> None:
        transport = FullSocket()
        protocol = transport.protocol = connected(transport)
        protocol.data_received(request("GET", "/long"))
        for _ in range(200):
            await asyncio.sleep(0)
        taken = sum(map(len, transport.writes))
        # Paused after the first write over the mark: one held bound's worth and the head.
        assert 65_536 < taken <= STREAM_HELD_BYTES + 16_384 + 1_024, taken
        assert protocol.cycle is not None and not protocol.cycle.response_complete
        transport.full = False  # the reader catches up
        protocol.resume_writing()
        await asyncio.gather(*protocol.tasks)
        await asyncio.sleep(0)
        protocol.connection_lost(None)
        body = b"".join(transport.writes).split(b"\r\n\r\n", 1)[1]
        assert body.count(b"4000\r\n") == 128 and body.endswith(b"0\r\n\r\n")

    asyncio.run(scenario())


def test_a_stream_ending_a_connection_it_closes_is_written_before_the_close() -> None:
    transport = asyncio.run(served(request("GET", "/stream", b"Connection: close\r\n")))
    assert transport.closed
    assert len(transport.writes) == 1
    assert transport.writes[0].endswith(b"3\r\none\r\n3\r\ntwo\r\n0\r\n\r\n")


def test_a_pipelined_requests_answer_follows_the_stream_before_it() -> None:
    async def scenario() -> bytes:
        transport = RecordingTransport()
        protocol = connected(transport)
        protocol.data_received(request("GET", "/stream") + request("GET", "/sized"))
        for _ in range(100):
            await asyncio.sleep(0)
            if b"defg" in b"".join(transport.writes):
                break
        await asyncio.gather(*protocol.tasks)
        protocol.connection_lost(None)
        return b"".join(transport.writes)

    sent = asyncio.run(scenario())
    stream_end = sent.index(b"0\r\n\r\n")
    assert sent.index(b"HTTP/1.1 200 OK", 1) > stream_end  # the second answer's head
    assert sent.endswith(b"abcdefg")


def test_a_streams_parts_are_dropped_once_its_connection_closed_under_it() -> None:
    async def scenario() -> RecordingTransport:
        transport = RecordingTransport()
        cycle = SimpleNamespace(response_started=True, chunked_encoding=True,
                                expected_content_length=0, scope={"method": "GET"})
        out = HeadWithBody(transport, cycle, asyncio.get_running_loop())  # type: ignore[arg-type]
        out.write(b"HTTP/1.1 200 OK\r\n\r\n")
        out.write(b"3\r\none\r\n")
        transport.closed = True  # the connection was lost in the same turn
        await asyncio.sleep(0)
        return transport

    assert asyncio.run(scenario()).writes == []


def test_a_head_request_gets_its_head_without_a_body() -> None:
    writes = asyncio.run(served(request("HEAD", "/sized"))).writes
    assert len(writes) == 1
    assert writes[0].startswith(b"HTTP/1.1 200 OK\r\n") and writes[0].endswith(b"\r\n\r\n")


def test_an_interim_100_continue_is_written_before_the_answer() -> None:
    sent = request("POST", "/sized", b"Expect: 100-continue\r\n", b"Content-Length: 2\r\n")
    writes = asyncio.run(served(sent + b"{}")).writes
    assert writes[0] == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert writes[1].startswith(b"HTTP/1.1 200 OK\r\n") and writes[1].endswith(b"abc")


def test_an_answer_cut_off_by_a_failure_closes_the_connection_with_nothing_written() -> None:
    transport = asyncio.run(served(request("GET", "/fails")))
    assert transport.closed
    assert transport.writes == []
