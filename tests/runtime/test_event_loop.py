"""A loop that is asyncio's for its whole life says so to sniffio once (anyio asks before
much of what it does), and puts back what the thread said before when it is done."""

from __future__ import annotations

import asyncio
import threading

import pytest
import sniffio
import uvicorn

from hookgate.runtime.event_loop import asyncio_named
from hookgate.server.serving import Server, listen, uvicorn_config


def test_inside_the_thread_answers_asyncio_and_afterwards_what_it_said_before() -> None:
    assert sniffio.thread_local.name is None
    with asyncio_named():
        assert sniffio.thread_local.name == "asyncio"
        assert sniffio.current_async_library() == "asyncio"  # no task needed to tell
        seen: list[str | None] = []
        other = threading.Thread(target=lambda: seen.append(sniffio.thread_local.name))
        other.start()
        other.join()
        assert seen == [None]  # another thread's loop is not named by this one
    assert sniffio.thread_local.name is None
    with pytest.raises(sniffio.AsyncLibraryNotFoundError):
        sniffio.current_async_library()


@pytest.mark.perf  # how anyio finds its loop in the server: a performance internal
def test_hookgate_serves_its_app_with_the_loop_named() -> None:
    seen: list[str | None] = []

    async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        if scope["type"] == "lifespan":
            return
        seen.append(sniffio.thread_local.name)

    server = Server(uvicorn_config(app, "127.0.0.1", 0))
    assert isinstance(server, uvicorn.Server)

    async def serve_then_stop() -> None:
        sock = listen("127.0.0.1", 0)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:  # noqa: ASYNC110 - uvicorn sets a flag, not an event
            await asyncio.sleep(0.01)
        port = sock.getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        await writer.drain()
        await reader.read()
        writer.close()
        server.should_exit = True
        await task

    asyncio.run(serve_then_stop())
    assert seen == ["asyncio"]
    assert sniffio.thread_local.name is None
