"""What the tests of the hot route path share (server/hot_route.py): a request sent through
FastAPI's own handler, to compare with the fast path's answer."""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from tests.live_server import LiveServer, live_server


@pytest.fixture
def through_fastapis_handler(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Call it to send the test's next requests through FastAPI's handler: the fast path
    steps aside for a request FastAPI's telemetry records."""
    from hookgate.server import hot_route

    def through_fastapi() -> None:
        monkeypatch.setattr(hot_route, "get_telemetry_data", lambda: object())
    return through_fastapi


@dataclass(frozen=True)
class Servers:
    """Two servers of one backend: the hot routes on the app's own router, as served; and
    included through FastAPI's ``include_router``, as before (decision record 0030)."""

    direct: LiveServer
    included: LiveServer


@contextmanager
def served_both_ways(direct: Callable[[], Any], included: Callable[[], Any]
                     ) -> Iterator[Servers]:
    """A live server of ``direct()``'s configuration as served, and one of
    ``included()``'s with its routers included as ``app.include_router`` includes them."""
    from hookgate.server import hot_route

    with live_server(direct()) as srv:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(hot_route, "on_the_app", lambda app, router: None)
            other = live_server(included())
            inc = other.__enter__()
        try:
            yield Servers(srv, inc)
        finally:
            other.__exit__(None, None, None)


@pytest.fixture
def solved_by_fastapi(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """How many times FastAPI's dependency solver runs from now on, by request path (a
    request the fast path answers never reaches it)."""
    import fastapi.routing

    solved: collections.Counter[str] = collections.Counter()
    solve = fastapi.routing.solve_dependencies

    async def counted(*args: Any, **kwargs: Any) -> Any:
        solved[kwargs["request"].url.path] += 1
        return await solve(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", counted)
    return solved
