"""``hookgate run``: run one agent of a configuration on one message, showing events live."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hookgate.cli.agent_services import agent_services
from hookgate.cli.app import app, console, fail
from hookgate.cli.config_source import (
    ConfigOption,
    ExampleOption,
    load_from_options,
    start_telemetry,
)

if TYPE_CHECKING:
    from hookgate.agent import Agent
    from hookgate.config import HookgateConfig
    from hookgate.demo.event_view import EventView
    from hookgate.llm.base import ChatModel

#: Config, agent, user or engine problems exit with this; a run that does not complete, 1.
USAGE_ERROR = 2


def _engines() -> dict[str, Any]:
    import hookgate.engines

    return dict(hookgate.engines.ENGINES)


def _initiator(cfg: HookgateConfig, agent: Agent, user: str | None) -> str | None:
    if user is None:
        return agent.owner_user_id
    spec = cfg.user(user)
    if spec is None:
        known = ", ".join(u.id for u in cfg.users) or "none"
        fail(f"{cfg.source}: no user '{user}' (users: {known})", USAGE_ERROR)
    if agent.org_id is not None and spec.org != agent.org_id:
        fail(f"user '{user}' belongs to org '{spec.org}', agent '{agent.id}' to "
             f"'{agent.org_id}'", USAGE_ERROR)
    return spec.id


async def _stream(engine_cls: Any, model: ChatModel, agent: Agent, message: str,
                  user_id: str | None, cfg: HookgateConfig) -> EventView:
    # Imported here so that --help loads Typer and little else.
    from hookgate.catalog.build import build_registry
    from hookgate.demo.event_view import EventView
    from hookgate.engines.delegation import Delegation

    view = EventView(console)
    try:
        async with agent_services(cfg) as services:
            engine = engine_cls(model, services=services, registries=build_registry,
                                delegation=Delegation(cfg.build_agents(), cfg.model_for))
            async for event in engine.stream(agent, message, user_id=user_id,
                                             org_id=agent.org_id):
                view.show(event)
    finally:
        close = getattr(model, "aclose", None)  # connections of an OpenAI-compatible model
        if close is not None:
            await close()
    return view


@app.command("run")
def run_command(
    message: Annotated[str, typer.Argument(help="What the user asks the agent.",
                                           show_default=False)],
    agent: Annotated[str, typer.Option("--agent", "-a", help="The agent's id in the file.",
                                       show_default=False)],
    config: ConfigOption = None,
    example: ExampleOption = None,
    user: Annotated[str | None, typer.Option(
        "--user", "-u", help="Who starts the run (default: the agent's owner).",
        show_default=False)] = None,
    engine: Annotated[str, typer.Option("--engine", help="The engine to run with.")] = "react",
) -> None:
    """Run an agent on MESSAGE, showing each tool call, hook decision and result live.

    Every hook decision is printed: blocks with the hook's name and reason, argument and
    result rewrites, side effects and hook failures; then the answer.

    Exit code 0 when the run completed and every tool call it made ran; 1 when it did not
    complete (failed, blocked at build, …), a hook blocked a call or withheld its result,
    or a call did not run because the model named a tool the agent does not have or gave
    arguments its schema refuses; 2 when the configuration, agent, user or engine is wrong.
    There is no approval service here: a call that needs a person's approval is blocked,
    and the output says so. The configuration's database (shown on stderr) is used and
    migrated for the hooks that keep records.

    Example: hookgate run --example purchasing --agent buyer "buy"
    """
    from hookgate.config import ConfigError
    from hookgate.storage.database import DatabaseError

    cfg = load_from_options(config, example, code=USAGE_ERROR)
    try:
        the_agent = cfg.build_agent(agent)
        model: ChatModel = cfg.model_for(agent)
    except ConfigError as exc:
        fail(str(exc), USAGE_ERROR)
    engines = _engines()
    if engine not in engines:
        fail(f"unknown engine '{engine}' (engines: {', '.join(engines)})", USAGE_ERROR)
    user_id = _initiator(cfg, the_agent, user)
    start_telemetry(cfg)
    try:
        view = asyncio.run(_stream(engines[engine], model, the_agent, message, user_id, cfg))
    except DatabaseError as exc:
        fail(f"{cfg.source}: database: {exc}", 1)
    except Exception as exc:  # the engine itself broke: say so instead of a traceback
        fail(f"the run broke: {type(exc).__name__}: {exc}", 1)
    raise typer.Exit(view.exit_code)
