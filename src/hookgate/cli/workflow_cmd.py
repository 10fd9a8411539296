"""``hookgate workflow run FILE --config CONFIG``: run a workflow, showing its events live."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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
    from hookgate.workflows import Workflow

#: Config, workflow or user problems exit with this; a run that does not complete, 1.
USAGE_ERROR = 2

workflow_app = typer.Typer(help="Run declared workflows (agent, tool and condition nodes).",
                           no_args_is_help=True)
app.add_typer(workflow_app, name="workflow")


async def _stream(cfg: HookgateConfig, agents: dict[str, Agent], workflow: Workflow,
                  message: str, user_id: str | None, org_id: str | None) -> EventView:
    # Imported here so that --help loads Typer and little else.
    from hookgate.catalog.build import build_registry
    from hookgate.demo.event_view import EventView
    from hookgate.workflows import WorkflowRunner

    view = EventView(console)
    async with agent_services(cfg) as services:
        runner = WorkflowRunner({workflow.id: workflow}, agents, cfg.model_for,
                                services=services, registries=build_registry)
        async for event in runner.stream(workflow.id, message, user_id=user_id,
                                         org_id=org_id):
            view.show(event)
    return view


def _user(cfg: HookgateConfig, user: str | None, org_id: str | None,
          default: str | None) -> str | None:
    if user is None:
        return default
    spec = cfg.user(user)
    if spec is None or (org_id is not None and spec.org != org_id):
        fail(f"{cfg.source}: no user '{user}' in org '{org_id}'", USAGE_ERROR)
    return spec.id


@workflow_app.command("run")
def run_workflow(
    file: Annotated[Path, typer.Argument(help="The workflow (YAML).", dir_okay=False,
                                         show_default=False)],
    config: ConfigOption = None,
    example: ExampleOption = None,
    message: Annotated[str, typer.Option("--input", "-i",
                                         help="The workflow's input ({{ input }}).")] = "",
    user: Annotated[str | None, typer.Option(
        "--user", "-u", help="Who starts the run (default: the as_agent's owner).",
        show_default=False)] = None,
) -> None:
    """Run the workflow in FILE with the agents, tools and models of the configuration.

    Tool nodes run as the workflow's `as_agent` (its hooks and identity), agent nodes run
    their agents with their own hooks. There is no approval service here: a call that
    needs a person's approval is blocked, and the output says so.

    Exit code 0 when the run completed and every tool call it made ran; 1 when it did not
    complete or a hook blocked a call or withheld its result; 2 for a wrong file or option.
    """
    from hookgate.config import ConfigError
    from hookgate.storage.database import DatabaseError
    from hookgate.workflows import WorkflowError, load_workflow

    cfg = load_from_options(config, example, code=USAGE_ERROR)
    try:
        workflow = load_workflow(file)
        agents = cfg.build_agents()
    except (WorkflowError, ConfigError) as exc:
        fail(str(exc), USAGE_ERROR)
    as_agent = agents.get(workflow.as_agent)
    if as_agent is None:
        fail(f"{file}: as_agent '{workflow.as_agent}' is not an agent of {cfg.source} "
             f"(agents: {', '.join(agents) or 'none'})", USAGE_ERROR)
    user_id = _user(cfg, user, as_agent.org_id, as_agent.owner_user_id)
    start_telemetry(cfg)
    try:
        view = asyncio.run(_stream(cfg, agents, workflow, message, user_id, as_agent.org_id))
    except DatabaseError as exc:
        fail(f"{cfg.source}: database: {exc}", 1)
    except Exception as exc:  # the runner itself broke: say so instead of a traceback
        fail(f"the workflow broke: {type(exc).__name__}: {exc}", 1)
    raise typer.Exit(view.exit_code)
