"""A response of known length leaves the server in one write, its head with its body
(server/http_protocol.py, ``HeadWithBody``); a streamed response, a ``HEAD`` answer and an
interim ``100 Continue`` are written as they come. Driven through the real protocol
(httptools' parser, uvicorn's request cycle) over a transport that records its writes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from uvicorn.server import ServerState

from hookgate.server.serving import uvicorn_config


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


async def served(request: bytes) -> RecordingTransport:
    config = uvicorn_config(app, "127.0.0.1", 0)
    config.load()
    protocol = config.http_protocol_class(config=config, server_state=ServerState(),
                                          app_state={})
    transport = RecordingTransport()
    protocol.connection_made(transport)
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


@pytest.mark.parametrize("path", ["/stream", "/empty"])
def test_a_streamed_or_empty_response_writes_its_head_at_once(path: str) -> None:
    writes = asyncio.run(served(request("GET", path))).writes
    assert writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert writes[0].endswith(b"\r\n\r\n")
    if path == "/stream":
        assert b"".join(writes[1:]) == b"3\r\none\r\n3\r\ntwo\r\n0\r\n\r\n"


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
