"""The hot routes — the guarded-call API's (an outside agent's every tool call: ``POST
/api/v1/calls``, ``POST /api/v1/calls/{call}/result``; and ``POST /api/v1/sessions``) and a
run's (``POST /api/runs``, its event stream and its read) — answered without FastAPI's
generic per-request machinery.

`HotRoute` is a router's ``route_class``: the same routes, paths, declarations and
endpoints. For a plain request (a body route's: ``Content-Type: application/json``, a body
that parses and validates; no FastAPI telemetry on the request) it takes the steps
FastAPI's handler takes, with FastAPI's own functions: the path and header parameters and
the body are validated by the declaration's fields (as ``request_params_to_args`` and
``request_body_to_args`` do, with what those work out of the declaration on every request
worked out once per route: `_params_reader`, `_body_reader`); the route's one dependency
(the caller: one of `_DEPENDENCIES`) runs; the endpoint runs, given the request if it
asks for it; a response it returns is the answer as it is, anything else is validated and
serialised by the response model (``serialize_response``). FastAPI runs the dependency
before it validates, so a request with a problem in its parameters or body is not taken
fast at all: FastAPI's handler then answers it, a missing token's 401 before a body's 422
as always. Anything else —
a parameter or body that does not validate, another content type, an empty body, invalid
JSON, FastAPI's telemetry recording the request, a dependency overridden — goes through
FastAPI's handler whole (the body read once, from the request's cache), which answers as it
always did: nothing on the fast path refuses or accepts what the slow path would not.

A route whose declaration the fast path does not handle exactly (another dependency, query
or cookie parameters, an embedded body, a security scope, a response or background-tasks
parameter, an endpoint that is not a coroutine function) is never taken fast: its handler
is FastAPI's.

`on_the_app` puts a router's routes on the app's own router, declared as
``app.include_router`` declares them, so routing finds them in one match instead of through
FastAPI's included-router machinery (decision records 0030, 0042).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response, params
from fastapi._compat import ModelField
from fastapi.datastructures import DefaultPlaceholder
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import request_body_to_args, request_params_to_args
from fastapi.routing import APIRoute, serialize_response
from fastapi.utils import is_body_allowed_for_status_code

try:  # FastAPI's own event-stream responses, which its handler streams itself
    from fastapi.sse import EventSourceResponse
except ImportError:  # pragma: no cover - a FastAPI without them
    EventSourceResponse = None  # type: ignore[assignment,misc]

try:  # FastAPI's route as an included router sees it (its prefix, its router's dependencies)
    from fastapi.routing import _effective_route_context_var
except ImportError:  # pragma: no cover - another FastAPI: never fast
    _effective_route_context_var = None  # type: ignore[assignment]

try:  # what FastAPI's request_params_to_args and request_body_to_args work out per request
    from fastapi._compat import Undefined, field_annotation_is_sequence
    from fastapi.dependencies.utils import (
        _get_form_models,
        _get_param_aliases,
        _get_param_model,
        _should_embed_body_fields,
        _validate_value_with_model_field,
    )
    _RESOLVABLE = True
except ImportError:  # pragma: no cover - another FastAPI: its functions on every request
    _RESOLVABLE = False

try:
    from fastapi.telemetry import get_telemetry_data
except ImportError:  # pragma: no cover - a FastAPI without native telemetry
    def get_telemetry_data() -> Any:  # type: ignore[misc]
        return None

from hookgate.server.auth import require_access, require_lasting_access, require_stream_access

#: This FastAPI has what the fast path calls, as the fast path calls it.
_SUPPORTED = (_effective_route_context_var is not None
              and "dump_json" in inspect.signature(serialize_response).parameters)

Handler = Callable[[Request], Coroutine[Any, Any, Response]]
#: The dependencies a hot route may declare (called with the request alone).
_DEPENDENCIES = (require_lasting_access, require_access, require_stream_access)
_JSON = "application/json"


class HotRoute(APIRoute):
    """An APIRoute whose plain requests skip FastAPI's generic handler (module docstring)."""

    def get_route_handler(self) -> Handler:
        slow = super().get_route_handler()
        route: Any = self
        if _effective_route_context_var is None:
            return slow
        effective = _effective_route_context_var.get()
        if effective is not None and effective.original_route is self:
            route = effective
        fast = _fast_handler(route)
        if fast is None:
            return slow

        async def handler(request: Request) -> Response:
            answer = await fast(request)
            return answer if answer is not None else await slow(request)

        return handler


def _handled(dependant: Dependant, route: Any) -> bool:
    """Whether the fast path takes every step the declaration asks for (an attribute this
    FastAPI does not have counts as a step it might ask for: never fast)."""
    subs = dependant.dependencies
    return (
        _SUPPORTED and len(subs) == 1
        and not dependant.query_params and not dependant.cookie_params
        and len(dependant.body_params) == (route.body_field is not None)
        and route._embed_body_fields is False
        and _none(dependant, "response_param_name",
                  "background_tasks_param_name", "security_scopes_param_name",
                  "websocket_param_name", "http_connection_param_name")
        and _answered(route)
        and not route.dependencies
        and all(sub.call in _DEPENDENCIES and sub.name and not sub.dependencies
                and sub.request_param_name is not None and not sub.path_params
                and not sub.query_params and not sub.header_params and not sub.cookie_params
                and not sub.body_params and not getattr(sub, "own_oauth_scopes", True)
                and _none(sub, "response_param_name", "background_tasks_param_name",
                          "security_scopes_param_name", "websocket_param_name",
                          "http_connection_param_name")
                for sub in subs)
    )


def _answered(route: Any) -> bool:
    """Whether the fast path answers as FastAPI's handler does whatever the endpoint
    returns: a response it returns as it is (FastAPI's handler adds no background tasks
    to it: the route declares none), anything else validated and serialised by a response
    model into JSON (FastAPI's ``dump_json`` path) or by FastAPI's encoder for the route's
    own response class (an event stream's: its endpoint returns the response). Only a
    coroutine endpoint is fast: FastAPI runs a plain function on a worker thread and drives
    a generator's stream itself."""
    if not inspect.iscoroutinefunction(route.dependant.call) or not (
            route.status_code is None or is_body_allowed_for_status_code(route.status_code)):
        return False  # (a status without a body: FastAPI's handler empties the answer)
    if isinstance(route.response_class, DefaultPlaceholder):
        return route.response_field is not None
    return (route.response_field is None and route.status_code is not None
            and isinstance(route.response_class, type)
            and issubclass(route.response_class, Response)
            and not (EventSourceResponse is not None
                     and issubclass(route.response_class, EventSourceResponse)))


def _none(dependant: Dependant, *names: str) -> bool:
    missing = object()
    return all(getattr(dependant, name, missing) is None for name in names)


def _fast_handler(route: Any) -> Callable[[Request], Coroutine[Any, Any, Response | None]] | None:
    dependant: Dependant = route.dependant
    if not _handled(dependant, route):
        return None
    endpoint = dependant.call
    assert endpoint is not None
    (caller,) = dependant.dependencies
    status = route.status_code or 200
    overrides = route.dependency_overrides_provider
    takes_body = route.body_field is not None
    takes_request = dependant.request_param_name
    read_path = _params_reader(dependant.path_params)
    read_headers = _params_reader(dependant.header_params)
    read_body = _body_reader(dependant.body_params) if takes_body else None
    serialised = route.response_field is not None

    async def fast(request: Request) -> Response | None:
        if get_telemetry_data() is not None:
            return None
        if getattr(overrides, "dependency_overrides", None):
            return None  # a dependency replaced (a test's): FastAPI resolves it
        if read_body is not None:
            if request.headers.get("content-type") != _JSON:
                return None
            body = await request.body()
            if not body:
                return None
            try:
                received = json.loads(body)
            except (ValueError, RecursionError):  # FastAPI's handler answers it, as always
                return None
        values = read_path(request.path_params)
        if values is None:
            return None
        headers = read_headers(request.headers)
        if headers is None:
            return None
        if read_body is not None:
            sent = await read_body(received)
            if sent is None:
                return None
            values |= sent
        assert caller.call is not None and caller.name is not None
        values[caller.name] = await caller.call(request)
        values |= headers
        if takes_request is not None:
            values[takes_request] = request
        answer = await endpoint(**values)
        if isinstance(answer, Response):
            return answer  # FastAPI's handler returns it as it is (no background tasks)
        content = await serialize_response(
            field=route.response_field, response_content=answer,
            include=route.response_model_include, exclude=route.response_model_exclude,
            by_alias=route.response_model_by_alias,
            exclude_unset=route.response_model_exclude_unset,
            exclude_defaults=route.response_model_exclude_defaults,
            exclude_none=route.response_model_exclude_none, dump_json=serialised)
        if serialised:
            return Response(content=content, media_type=_JSON, status_code=status)
        # As FastAPI's handler makes it (a class that cannot take content fails as there).
        made: Response = route.response_class(content, background=None, status_code=status)
        return made

    return fast


Values = dict[str, Any]


def _params_reader(fields: Sequence[ModelField]) -> Callable[[Mapping[str, Any]], Values | None]:
    """FastAPI's ``request_params_to_args(fields, …)``: the values of ``fields`` read from a
    request's path parameters or headers, or None when one of them does not validate.

    FastAPI works out afresh on every request what each field's declaration says of how it
    is read (a parameter model? a sequence? which request key?), dozens of calls a request
    for the path parameter and the framework header. Those answers never change: they are
    asked of FastAPI's own functions once, here, and a field FastAPI reads as one value
    under one key is read so; each value is then validated by FastAPI's own
    ``_validate_value_with_model_field`` (the field's default when it is absent), as
    ``request_params_to_args`` does. A field read any other way keeps FastAPI's function
    on every request. Decision record 0038."""
    def generic(received: Mapping[str, Any]) -> Values | None:
        values, errors = request_params_to_args(fields, received)
        return None if errors else values

    if not _RESOLVABLE:
        return generic
    plain: list[tuple[ModelField, str, tuple[str, str]]] = []
    for field in fields:
        aliases = _get_param_aliases(field)
        info = field.field_info
        if (not isinstance(info, params.Param) or len(aliases) != 1
                or _get_param_model(field) is not None
                or field_annotation_is_sequence(info.annotation)):
            return generic
        key = aliases[0][1]
        plain.append((field, key, (info.in_.value, key)))

    def read(received: Mapping[str, Any]) -> Values | None:
        values: Values = {}
        for field, key, loc in plain:
            value = received.get(key)
            checked, errors = _validate_value_with_model_field(
                field=field, value=Undefined if value is None else value, values=values,
                loc=loc)
            if errors:
                return None
            values[field.name] = checked
        return values

    return read


def _body_reader(fields: list[ModelField]) -> Callable[[Any], Coroutine[Any, Any, Values | None]]:
    """FastAPI's ``request_body_to_args(fields, …, False)`` for a parsed JSON body, or None
    when it does not validate: a body of one field that FastAPI does not embed (worked out
    once by its own functions) is validated by FastAPI's ``_validate_value_with_model_field``
    at ``("body",)``, as that function does; any other keeps FastAPI's function."""
    async def generic(received: Any) -> Values | None:
        values, errors = await request_body_to_args(fields, received, False)
        return None if errors else values

    if not (_RESOLVABLE and len(fields) == 1 and not _should_embed_body_fields(fields)
            and not _get_form_models(fields[0])):
        return generic
    (field,) = fields

    async def read(received: Any) -> Values | None:
        checked, errors = _validate_value_with_model_field(
            field=field, value=received, values={}, loc=("body",))
        return None if errors else {field.name: checked}

    return read


#: What `APIRouter.add_api_route` is told besides the path and endpoint: each read from the
#: included route under the same name.
_DECLARATION = tuple(name for name in inspect.signature(APIRouter.add_api_route).parameters
                     if name not in ("self", "path", "endpoint", "route_class_override"))


def on_the_app(app: FastAPI, router: APIRouter) -> list[APIRoute] | None:
    """``router``'s routes added to ``app``'s own router, each as FastAPI declares a route of
    an included router (its path, declaration and class; the app's dependency overrides),
    in order at the end of the app's routes; None (nothing added) when a route is not an
    APIRoute or does not keep every part of its declaration: then include the router.

    FastAPI tries an included router's routes through its inclusion (each route matched
    twice, each match keeping its context in the scope): about 20 µs a request against 3 µs
    for a route of the app's own."""
    routes = list(router.routes)
    if router.on_startup or router.on_shutdown or not all(
            type(route) is router.route_class and isinstance(route, APIRoute)
            and all(hasattr(route, name) for name in _DECLARATION) for route in routes):
        return None
    added: list[APIRoute] = []
    for route in routes:
        assert isinstance(route, APIRoute)
        app.router.add_api_route(route.path, route.endpoint, route_class_override=type(route),
                                 **{name: getattr(route, name) for name in _DECLARATION})
        made = app.router.routes[-1]
        assert isinstance(made, APIRoute)
        added.append(made)
    return added
