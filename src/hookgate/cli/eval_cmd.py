"""``hookgate eval SUITE --config CONFIG``: run an eval suite and report pass or fail per case.

Evals bypass hooks on purpose (an automated evaluation must not wait for a person); the
report and every event of an eval run say so.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from hookgate.cli.agent_services import agent_services
from hookgate.cli.app import app, console, fail
from hookgate.cli.config_source import (
    ConfigOption,
    ExampleOption,
    load_from_options,
    start_telemetry,
)

if TYPE_CHECKING:
    from hookgate.evals import CaseResult, EvalSuite

#: Config or suite problems exit with this; a failed case, 1.
USAGE_ERROR = 2


def _report(title: str, results: list[CaseResult]) -> Table:
    table = Table(title=title, caption="hooks_bypassed: true (evals run tools without hooks)")
    table.add_column("case")
    table.add_column("result")
    table.add_column("tool calls")
    table.add_column("details", overflow="fold")
    for r in results:
        calls = [e["tool_name"] for e in r.result.trace if e["type"] == "tool_call"]
        table.add_row(r.case.name, "[green]PASS[/]" if r.passed else "[bold red]FAIL[/]",
                      ", ".join(calls) or "-",
                      "; ".join(r.problems) or (r.result.answer or ""))
    return table


@app.command("eval")
def eval_command(
    suite: Annotated[Path, typer.Argument(help="The eval suite (YAML).", dir_okay=False,
                                          show_default=False)],
    config: ConfigOption = None,
    example: ExampleOption = None,
) -> None:
    """Run every case of SUITE against the configuration's agents, with hooks bypassed.

    A case gives a message and expects a substring of the answer and/or the tool calls
    made (in order; the arguments listed must match). The agents' hook declarations must
    still build, against the configuration's database (shown on stderr). Exit code 0 when
    every case passed, 1 when one failed, 2 for a wrong file or option.
    """
    from hookgate.config import ConfigError
    from hookgate.evals import EvalSuiteError, load_suite, run_suite
    from hookgate.storage.database import DatabaseError

    cfg = load_from_options(config, example, code=USAGE_ERROR)
    try:
        the_suite = load_suite(suite)
        agents = cfg.build_agents()
    except (EvalSuiteError, ConfigError) as exc:
        fail(str(exc), USAGE_ERROR)
    start_telemetry(cfg)

    async def run(suite: EvalSuite) -> list[CaseResult]:
        async with agent_services(cfg) as services:
            return await run_suite(suite, agents, cfg.model_for, services=services)

    try:
        results = asyncio.run(run(the_suite))
    except (KeyError, ConfigError) as exc:
        fail(str(exc).strip("'\""), USAGE_ERROR)
    except DatabaseError as exc:
        fail(f"{cfg.source}: database: {exc}", 1)
    console.print(_report(the_suite.name or str(suite), results))
    failed = sum(not r.passed for r in results)
    console.print(f"{len(results) - failed} passed, {failed} failed (hooks_bypassed: true)")
    raise typer.Exit(1 if failed else 0)
