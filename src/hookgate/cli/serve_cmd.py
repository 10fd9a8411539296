"""``hookgate serve`` (the HTTP API, the web inbox, channel callbacks and, by default, the
run worker) and ``hookgate worker`` (the run worker alone, for PostgreSQL deployments)."""

from __future__ import annotations

import asyncio
import signal
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from hookgate.cli.app import app, console, err_console, fail
from hookgate.cli.config_source import (
    ConfigOption,
    ExampleOption,
    check_database_or_fail,
    load_from_options,
    show_database,
    start_telemetry,
)
from hookgate.cli.start_collector import paused_until_started

if TYPE_CHECKING:
    import socket

    from hookgate.config import HookgateConfig
    from hookgate.runtime.runtime import Runtime
    from hookgate.server.serving import Server


def _port(value: int) -> int:
    # A callback rather than min/max: the help then reads <int>, not a range expression.
    if not 1 <= value <= 65535:
        raise typer.BadParameter(f"{value} is not a port (1 to 65535)")
    return value


HostOption = Annotated[str, typer.Option(help="Interface to listen on.")]
PortOption = Annotated[int, typer.Option(help="Port to listen on (1 to 65535).",
                                         callback=_port)]


def _load(config: ConfigOption, example: ExampleOption) -> HookgateConfig:
    from hookgate.runtime.channel_records import SecretsKey, SecretsKeyError

    cfg = load_from_options(config, example, code=2)
    if cfg.channels:
        try:
            SecretsKey.from_environment()
        except SecretsKeyError as exc:
            fail(str(exc), 2)
    start_telemetry(cfg)
    return cfg


def _broken_agents(cfg: HookgateConfig, *, allow: bool) -> dict[str, str]:
    """Each agent that does not build, by id, with why; exits naming each of them unless
    ``allow``, else says each on stderr."""
    from hookgate.config.agent_check import check_agents
    from hookgate.hooks.services import HookServices
    from hookgate.storage.database import Database

    # The database is named, not opened: hooks that keep records build against it.
    broken = check_agents(cfg, HookServices(database=Database(cfg.database))).broken
    if not broken:
        return {}
    for agent in broken:
        err_console.print(Text.assemble(("broken agent: " if allow else "error: ",
                                         "bold yellow" if allow else "bold red"),
                                        f"{cfg.source}: {agent}"), soft_wrap=True)
    if not allow:
        fail(f"{len(broken)} agent(s) cannot run ({', '.join(a.agent_id for a in broken)}): "
             "fix them (`hookgate check` shows each chain) or start with "
             "--allow-broken-agents")
    return {agent.agent_id: str(agent) for agent in broken}


def _refuse_shared_sqlite(database: str) -> None:
    # The executor holds the lock for the process's life; this probe only turns a second
    # instance on the same file into a clear message before anything starts.
    from hookgate.runs.executors.in_process import InstanceLock, InstanceLocked, sqlite_file
    from hookgate.storage.database import Database

    path = sqlite_file(Database(database).url) if database.startswith("sqlite") else None
    if path is None:
        return
    probe = InstanceLock(path)
    try:
        probe.acquire()
    except InstanceLocked as exc:
        fail(str(exc), 2)
    probe.release()


def _build(config: ConfigOption, example: ExampleOption, host: str, port: int, *,
           log_level: str, worker: bool, allow_broken_agents: bool
           ) -> tuple[Server, socket.socket, HookgateConfig]:
    """The checks before serving, the listening socket and the server, ready to run."""
    from hookgate.app import build_server
    from hookgate.runtime.deployment import deployment_from_config
    from hookgate.server.serving import PortUnavailable, listen

    cfg = _load(config, example)
    if not worker and cfg.database.startswith("sqlite"):
        fail("--no-worker needs PostgreSQL: a SQLite database is served by one instance "
             "that executes its runs itself", 2)
    check_database_or_fail(cfg)
    broken = _broken_agents(cfg, allow=allow_broken_agents)
    _refuse_shared_sqlite(cfg.database)
    from hookgate.config.modes import watch_config_modes  # `hookgate policy reload` modes

    if (why := watch_config_modes(cfg)) is not None:
        err_console.print(f"note: {why}", highlight=False, soft_wrap=True)
    try:
        sock = listen(host, port)
    except PortUnavailable as exc:
        fail(str(exc))
    deployment = deployment_from_config(cfg)
    deployment.broken_agents = broken
    server, _ = build_server(deployment, host, port, log_level=log_level, worker=worker)
    return server, sock, cfg


@app.command()
def serve(
    config: ConfigOption = None,
    example: ExampleOption = None,
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    worker: Annotated[bool, typer.Option(
        "--worker/--no-worker",
        help="Also execute runs (default). --no-worker serves the API only; runs then "
             "execute on `hookgate worker` processes (PostgreSQL only).")] = True,
    allow_broken_agents: Annotated[bool, typer.Option(
        "--allow-broken-agents",
        help="Start even when an agent's hooks or model do not build (`hookgate check` "
             "names why); such an agent is named in the log and in GET /api/agents, and "
             "its runs end blocked_build.")] = False,
) -> None:
    """Serve the API and the web inbox; runs waiting for approval resume on start.

    Before listening, checks what `hookgate check` checks: the database (reachable, and
    migrated or migratable) and every agent.

    Exit code 1 when the database or an agent cannot be served (naming each broken agent
    and entry, unless --allow-broken-agents) or the port cannot be listened on; 2 when the
    command or its configuration cannot be used: a usage error, a configuration file that
    is missing or invalid, channels without HOOKGATE_SECRETS_KEY, telemetry that cannot
    start, --no-worker with SQLite, or a SQLite file another instance already serves.
    """
    with paused_until_started():
        server, sock, cfg = _build(config, example, host, port, log_level=log_level,
                                   worker=worker, allow_broken_agents=allow_broken_agents)
    role = "" if worker else " (API only)"
    console.print(f"hookgate serving {cfg.source} on http://{host}:{port}/{role}",
                  highlight=False, soft_wrap=True)
    show_database(cfg.database)
    server.run(sockets=[sock])


@app.command("worker")
def worker_command(
    config: ConfigOption = None,
    example: ExampleOption = None,
) -> None:
    """Execute runs from the run queue without serving HTTP (PostgreSQL only)."""
    from hookgate.runtime.deployment import deployment_from_config
    from hookgate.runtime.runtime import Runtime

    with paused_until_started():
        cfg = _load(config, example)
        if cfg.database.startswith("sqlite"):
            fail("hookgate worker needs PostgreSQL: with a SQLite database, `hookgate serve` "
                 "executes the runs itself", 2)
        check_database_or_fail(cfg)
        runtime = Runtime(deployment_from_config(cfg), worker=True)
    console.print(f"hookgate worker for {cfg.source}", highlight=False, soft_wrap=True)
    show_database(cfg.database)
    asyncio.run(_work(runtime))


async def _work(runtime: Runtime) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await runtime.start()
    try:
        await stop.wait()
    finally:
        await runtime.stop()
