"""``hookgate db upgrade``: bring the database schema up to date (Alembic migrations)."""

from __future__ import annotations

from typing import Annotated

import typer

from hookgate.cli.app import app, console, fail
from hookgate.cli.config_source import (
    ConfigOption,
    ExampleOption,
    load_from_options,
    show_database,
)

db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")

DatabaseOption = Annotated[
    str | None,
    typer.Option("--database", help="Database URL (instead of --config).", show_default=False),
]


def database_url(config: ConfigOption, example: ExampleOption, database: str | None) -> str:
    """The database the options name (shown on stderr); a relative SQLite file in a
    configuration follows the file, one given with ``--database`` the working directory."""
    if database:
        url = database
    elif config is None and example is None:
        fail("give --config FILE or --database URL", 2)
    else:
        url = load_from_options(config, example, code=2).database
    show_database(url)
    return url


@db_app.command("upgrade")
def upgrade(config: ConfigOption = None, example: ExampleOption = None,
            database: DatabaseOption = None) -> None:
    """Apply the migrations the database lacks (the server also does this on start)."""
    from hookgate.storage.database import DatabaseError, run_upgrade_sync

    url = database_url(config, example, database)
    try:
        run_upgrade_sync(url)
    except DatabaseError as exc:
        fail(str(exc))
    console.print("database is up to date")
