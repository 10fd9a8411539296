"""``hookgate check``: load a configuration and build every agent's hook registry, so a bad
file or declaration is found before anything runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from hookgate.cli.app import app, console, err_console, fail
from hookgate.cli.config_source import (
    ConfigOption,
    ExampleOption,
    check_database_or_fail,
    load_from_options,
)

if TYPE_CHECKING:
    from hookgate.config import AgentSpec, HookgateConfig
    from hookgate.hooks.registry import HookRegistry


def _chain_table(registry: HookRegistry) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    for column in ("#", "point", "hook", "priority", "fail mode", "timeout", "matcher"):
        if column == "matcher":
            # Never narrower than its header: folded, "matcher" read "matche r" at 80 columns.
            table.add_column(column, overflow="fold", min_width=len(column))
        else:
            table.add_column(column, no_wrap=True)
    for i, hook in enumerate(registry.hooks(), start=1):
        matcher: Any = getattr(hook, "matcher", None)
        table.add_row(
            str(i), hook.point.value, hook.name, str(hook.priority), hook.fail_mode,
            "-" if hook.timeout is None else f"{hook.timeout:g}s",
            "-" if matcher is None else str(matcher),
        )
    return table


def _print_whole(table: Table) -> None:
    """The table at its natural width when the output is not a terminal (a file, a pipe, a
    test): at rich's default 80 columns its cells were cut ("priori…") and headers folded
    ("matche r"). A terminal's own width still applies on a terminal."""
    if console.is_terminal:
        console.print(table)
        return
    natural = Measurement.get(console, console.options.update(width=10_000), table).maximum
    # print(width=…) cannot go past the console's own width: a console as wide as the table.
    Console(file=console.file, width=max(natural, console.width)).print(table)


def _agent_summary(cfg: HookgateConfig, spec: AgentSpec) -> str:
    model = cfg.models[spec.model]
    return (
        f"agent [bold]{spec.id}[/bold] ({spec.name or spec.id}): org {spec.org or '-'}, "
        f"owner {spec.owner or '-'}, model {spec.model} ({model.type}), "
        f"tools {', '.join(spec.tools) or '-'}; confirmation {spec.confirmation_mode}, "
        f"approver {spec.confirmation_approver_scope}, timeout {spec.confirmation_timeout_s:g}s"
        f"{', for all calls' if spec.require_confirmation_for_all else ''}"
    )


@app.command("check")
def check_command(config: ConfigOption = None, example: ExampleOption = None) -> None:
    """Check a configuration and print each agent's hook chain in run order.

    Loads the file, builds each agent's model and hook registry, and prints the chain:
    point, hook, priority, fail mode, timeout and matcher.

    Also checks the database: reachable, and migrated or migratable.

    Exit code 0 when everything builds; 1 when something does not, naming the file and each
    broken agent and entry. Example: hookgate check --example purchasing
    """
    # Imported here, not at the top: every command's --help would pay for them.
    from hookgate.config.agent_check import check_agents
    from hookgate.hooks.services import HookServices
    from hookgate.storage.database import Database, DatabaseError

    cfg = load_from_options(config, example, code=1)
    console.print(f"config {cfg.source}", highlight=False, soft_wrap=True)
    schema = check_database_or_fail(cfg)
    # The database is named, not opened: hooks that keep records build against it.
    try:
        services = HookServices(database=Database(cfg.database))
    except DatabaseError as exc:
        fail(f"{cfg.source}: database: {exc}")
    checked = check_agents(cfg, services)
    for spec in cfg.agents:
        registry = checked.registries.get(spec.id)
        if registry is None:
            continue
        console.print()
        console.print(_agent_summary(cfg, spec), highlight=False, soft_wrap=True)
        _print_whole(_chain_table(registry))
        for hook in registry.hooks():
            for note in getattr(hook, "notes", None) or ():
                console.print(f"  {hook.name}: no equivalent for {note}", highlight=False,
                              soft_wrap=True)
    if checked.broken:
        for broken in checked.broken[:-1]:
            err_console.print(Text.assemble(("error: ", "bold red"), f"{cfg.source}: {broken}"),
                              soft_wrap=True)
        fail(f"{cfg.source}: {checked.broken[-1]}")
    console.print()
    console.print(f"database: {schema}", highlight=False, soft_wrap=True, markup=False)
    console.print()
    console.print(
        f"ok: {len(cfg.agents)} agent(s), {len(cfg.tool_objects)} tool(s), "
        f"{len(cfg.models)} model(s), {len(cfg.channels)} channel(s)",
        style="bold green", highlight=False,
    )
    raise typer.Exit(0)
