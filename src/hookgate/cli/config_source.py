"""``--config FILE`` or ``--example NAME``: the options that name a configuration, shared by
the commands that load one, and loading it (and its process-wide telemetry) with errors
printed the way a user can act on.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hookgate.cli.app import err_console, fail
from hookgate.examples import available_examples, example_path

if TYPE_CHECKING:
    from hookgate.config import HookgateConfig

_EXAMPLES = available_examples()

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", dir_okay=False, help="The configuration file (YAML).",
                 show_default=False),
]
ExampleOption = Annotated[
    str | None,
    typer.Option(
        "--example",
        help=(
            f"Use a bundled example instead of --config: {', '.join(_EXAMPLES) or 'none'} "
            "(`hookgate check --example NAME` prints its path; copy it to start your own). "
            "Its SQLite file is made in the working directory."
        ),
        show_default=False,
    ),
]


def config_path(config: Path | None, example: str | None, *, code: int) -> Path:
    """The file the options name; exits with ``code`` unless exactly one was given."""
    if config is not None and example is not None:
        fail("give --config FILE or --example NAME, not both", code)
    if example is not None:
        try:
            return example_path(example)
        except LookupError as exc:
            fail(str(exc), code)
    if config is None:
        fail("give --config FILE (or --example NAME for a bundled example: "
             f"{', '.join(_EXAMPLES) or 'none'})", code)
    return config


def load_from_options(config: Path | None, example: str | None, *, code: int,
                      one_line: bool = False) -> HookgateConfig:
    """Load the configuration the options name; on any problem print it and exit with ``code``
    (its problems joined into one line with ``one_line``, for stderr an MCP client shows).

    Relative paths in a file follow the file; a bundled example (a template, perhaps in a
    read-only folder) keeps its SQLite file in the working directory instead.
    """
    # The configuration schema (pydantic models, engines, tools) loads only when a command
    # reads a file, not for --help.
    from hookgate.config import ConfigError, load_config

    path = config_path(config, example, code=code)
    try:
        return load_config(path, data_dir=Path.cwd() if example is not None else None)
    except ConfigError as exc:
        said = str(exc)
        fail("; ".join(line.strip() for line in said.splitlines()) if one_line else said, code)


def start_telemetry(cfg: HookgateConfig, *, code: int = 2) -> None:
    """Install OpenTelemetry as the ``telemetry:`` section and OTEL_* variables say."""
    from hookgate.telemetry.setup import TelemetrySetupError, install

    try:
        install(cfg.telemetry.settings())
    except TelemetrySetupError as exc:
        fail(f"{cfg.source}: telemetry: {exc}", code)


def show_database(url: str) -> None:
    """Say on stderr which database a command uses, so a wrong one is seen at once."""
    from hookgate.storage.database import describe_database

    err_console.print(f"database: {describe_database(url)}", style="dim", highlight=False,
                      soft_wrap=True, markup=False)


def check_database_or_fail(cfg: HookgateConfig, code: int = 1) -> str:
    """Whether the configuration's database can be served (reached, and migrated or
    migratable), said in a word; otherwise the one-line reason, and exit with ``code``."""
    import asyncio

    from hookgate.storage.database_check import DatabaseUnusable, check_database

    try:
        return asyncio.run(check_database(cfg.database)).describe()
    except DatabaseUnusable as exc:
        fail(f"{cfg.source}: database: {exc}", code)
