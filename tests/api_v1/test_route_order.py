"""The guarded-call API's routes are tried before every other router (its ask and report
come on every tool call of an outside agent), and that order decides nothing: every
request reaches the same route, or the same 405, as with those routes tried last."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from starlette.routing import Match, Route

from hookgate.app import create_app
from hookgate.runtime.runtime import Runtime
from hookgate.server.routes import guarded_calls
from tests.provenance.test_paths import deployment

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
#: Values put in each path parameter: ids of both kinds and the literal segments around.
VALUES = ("gc_" + "a" * 40, "x", "calls", "result", "events", "sessions", "api", "v1")


def _app(tmp_path: Path) -> Any:
    return create_app(Runtime(deployment(f"sqlite+aiosqlite:///{tmp_path / 'h.db'}")))


def _formats(routes: list[Any]) -> set[str]:
    found = set()
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            found |= _formats(list(inner.routes))
        elif isinstance(getattr(route, "path", None), str):
            found.add(route.path)
    return found


def _paths(fmt: str) -> set[str]:
    names = re.findall(r"{[^}]+}", fmt)
    out = set()
    for values in itertools.product(VALUES, repeat=len(names)):
        path = fmt
        for name, value in zip(names, values, strict=True):
            path = path.replace(name, value, 1)
        out.add(path)
    return out


def _winner(routes: list[Any], method: str, path: str) -> tuple[Match, Any] | None:
    # Starlette's router: the first full match, else the first partial one (a 405).
    scope = {"type": "http", "method": method, "path": path, "root_path": "",
             "headers": [], "query_string": b""}
    partial = None
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return match, route
        if match is Match.PARTIAL and partial is None:
            partial = (match, route)
    return partial


def _ours(route: Any) -> bool:
    # The guarded-call API's routes, on the app's own router (server/hot_route.on_the_app).
    return getattr(route, "endpoint", None) in {r.endpoint for r in guarded_calls.router.routes}


def test_the_guarded_call_routes_come_before_every_other_router(tmp_path: Path) -> None:
    routes = list(_app(tmp_path).router.routes)
    ours = [i for i, r in enumerate(routes) if _ours(r)]
    others = [i for i, r in enumerate(routes)
              if getattr(r, "original_router", None) not in (None, guarded_calls.router)]
    assert len(ours) == len(guarded_calls.router.routes) and others and max(ours) < min(others)
    assert ours == list(range(ours[0], ours[0] + len(ours)))
    # Ahead of the routes before them that the OpenAPI document does not list (FastAPI's
    # documentation routes, a mount's), never of one it lists: its order of paths stays.
    before = routes[ours[0] - 1] if ours[0] else None
    assert before is None or not (isinstance(before, Route) and not before.include_in_schema)
    assert [r.path for r in routes[ours[0]:ours[-1] + 1]] == \
        [r.path for r in guarded_calls.router.routes]


def test_tried_first_or_last_every_request_reaches_the_same_route(tmp_path: Path) -> None:
    routes = list(_app(tmp_path).router.routes)
    ours = [r for r in routes if _ours(r)]
    assert ours
    last = [r for r in routes if not _ours(r)] + ours
    paths = set().union(*(_paths(f) for f in _formats(routes)))
    assert "/api/v1/calls/gc_" + "a" * 40 + "/result" in paths and len(paths) > 100
    differ = [(method, path) for method in METHODS for path in sorted(paths)
              if _winner(routes, method, path) != _winner(last, method, path)]
    assert differ == []
