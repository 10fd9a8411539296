"""The FastAPI application: the HTTP API of SPEC §6 and the web portal at ``/``, with the
mounts its composer gives it (hookgate.app adds the MCP gateway)."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.routing import BaseRoute, Route

from hookgate.runtime.runtime import Runtime
from hookgate.server import errors
from hookgate.server.limits import DEFAULT_MAX_BODY, BodySizeLimit
from hookgate.server.mounts import Mount
from hookgate.server.routes import catalog, confirmations, runs

STATIC = Path(__file__).with_name("static")


def create_app(runtime: Runtime, *, keepalive_s: float = 15.0,
               max_body: int = DEFAULT_MAX_BODY, own_process: bool = False,
               access_recheck_s: float | None = None,
               mounts: Sequence[Mount] = ()) -> FastAPI:
    """An app serving ``runtime``; the runtime starts and stops with the app, and each of
    ``mounts`` (interfaces served beside the API, `hookgate.app.create_app` gives them)
    runs between the two.

    ``access_recheck_s`` (default: the deployment's ``server: access_recheck_s``) is how often
    the event streams and MCP sessions ask again whether their caller still has access.

    ``own_process`` is for a process that is the server's alone (``hookgate serve``), never
    for an app sharing its process (tests, embedding): once the runtime has started, the
    collector is tuned (:func:`tune_collector`) and FastAPI's request telemetry is settled
    (:func:`settle_request_telemetry`)."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await runtime.start()
        if own_process:
            tune_collector()
            settle_request_telemetry(app)
        try:
            async with AsyncExitStack() as running:
                for part in installed:
                    await running.enter_async_context(part)
                yield
        finally:
            await runtime.stop()

    app = FastAPI(title="hookgate", version="0.1.0", lifespan=lifespan,
                  description="Hooks that make rules about an LLM agent's tool calls hold.")
    recheck = runtime.deployment.access_recheck_s if access_recheck_s is None \
        else access_recheck_s
    if not recheck > 0:
        raise ValueError(f"access_recheck_s must be a positive number of seconds, not "
                         f"{recheck!r}")
    app.state.runtime = runtime
    app.state.keepalive_s = keepalive_s
    app.state.access_recheck_s = recheck
    installed = [mount.install(app) for mount in mounts]
    errors.install(app)
    _include_hot_routes(app)
    _install_sign_in(app, runtime)
    _include_run_routes(app)
    app.include_router(confirmations.router)
    app.include_router(catalog.router)
    _include_optional_routes(app)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    async def portal() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.add_middleware(BodySizeLimit, max_bytes=max_body)
    return app


#: Container objects allocated (net of those freed) between two young collections.
GC_YOUNG_THRESHOLD = 20_000


def tune_collector() -> None:
    """Set the garbage collector up for a long-running server, once it has started.

    Every object alive then (modules, the configuration, the app) moves into the permanent
    generation, out of every later collection, whose full passes otherwise scan them again
    and again; and a young collection waits for 20,000 new objects instead of 700, so the
    objects of a request or a run step, mostly freed by reference counting before then, are
    rarely scanned at all. Measured under load (PostgreSQL, 64 clients): the collector's
    time from ~0.65 s to ~0.11 s per 1,300 runs, ~4 % of the server's CPU; one young
    collection then takes a few milliseconds.
    """
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def settle_request_telemetry(app: FastAPI) -> bool:
    """Answer once, for a server process, whether FastAPI records each request's telemetry;
    returns the answer.

    FastAPI asks on every request whether an OpenTelemetry provider is installed: three
    provider look-ups, each of which reads ``os.environ`` while none is set, about 4 µs a
    request. In ``hookgate serve`` the providers are installed before the app starts
    (``telemetry:``, ``opentelemetry-instrument``, FastAPI's own set-up from the
    environment), and a provider once set is never unset: an answer of yes is left to the
    live check, an answer of no is kept. A provider that code running in the server
    installs later (an agent's hook at its first call) reaches hookgate's own spans
    (``telemetry.switch.refresh``), not FastAPI's request spans. Decision record 0030.
    """
    native = getattr(app, "_native_telemetry", None)
    enabled = getattr(native, "enabled", None)
    if not callable(enabled):  # a FastAPI without native telemetry asks nothing
        return False
    on = bool(enabled())
    if not on:
        native.enabled = _off  # type: ignore[union-attr]
    return on


def _off() -> bool:
    return False


def _install_sign_in(app: FastAPI, runtime: Runtime) -> None:
    """People's sign-in through an OpenID Connect provider (``oidc:``), when configured."""
    from hookgate.server.oidc import routes

    # /auth/session answers either way: the portal asks whether to offer the sign-in.
    app.include_router(routes.router)
    app.state.sign_in = None
    spec = runtime.deployment.oidc
    if spec is None:
        return
    try:
        from hookgate.server.oidc.sign_in import SignIn
    except ImportError as exc:
        raise RuntimeError(f"oidc: needs Authlib, which is not installed ({exc}): pip "
                           "install 'hookgate[oidc]'") from exc

    public = runtime.deployment.public_url
    redirect = spec.redirect_url or (f"{public.rstrip('/')}/auth/callback" if public else None)
    if redirect is None:
        raise ValueError("oidc needs redirect_url or server.public_url: the provider's "
                         "redirect comes from the configuration, never the request's Host")
    app.state.sign_in = SignIn(runtime.db, spec, redirect)


def _include_hot_routes(app: FastAPI) -> None:
    # Tried first: the routes on every outside agent's tool call (routes/registry.py), as
    # routes of the app's own router (hot_route.on_the_app), ahead of FastAPI's
    # documentation routes and a mount's routes that the OpenAPI document does not list
    # (each a path tried in vain on every request, ~10 µs in all), never ahead of a route
    # it lists: its order of paths stays. Decision record 0030.
    from hookgate.server.hot_route import on_the_app
    from hookgate.server.routes import registry

    routes = app.router.routes
    for router in registry.routers(registry.HOT_ROUTE_MODULES):
        before = len(routes)
        if on_the_app(app, router) is None:
            app.include_router(router)
        added = routes[before:]
        del routes[before:]
        at = before
        while at > 0 and _unlisted(routes[at - 1]):
            at -= 1
        routes[at:at] = added


def _include_run_routes(app: FastAPI) -> None:
    # In their place among the routers, as routes of the app's own router: every run's start
    # and event stream then match in one step (hot_route.on_the_app; decision record 0042).
    from hookgate.server.hot_route import on_the_app

    if on_the_app(app, runs.router) is None:
        app.include_router(runs.router)


def _unlisted(route: BaseRoute) -> bool:
    """A route the OpenAPI document does not show (a router or a mount counts as shown: it
    may show some)."""
    return isinstance(route, Route) and not route.include_in_schema


def _include_optional_routes(app: FastAPI) -> None:
    # Routes of rooms that register themselves (channel callbacks, audit, orgs, workflows).
    from hookgate.server.routes import registry

    for router in registry.routers():
        app.include_router(router)
