"""``hookgate orgs read-only ORG on|off``: the org's read-only mode, from the next tool call."""

from __future__ import annotations

import asyncio
from enum import StrEnum
from typing import Annotated

import typer

from hookgate.cli.app import app, console, fail
from hookgate.cli.config_source import ConfigOption, ExampleOption
from hookgate.cli.db_cmd import DatabaseOption, database_url

orgs_app = typer.Typer(help="Orgs and their read-only mode.", no_args_is_help=True)
app.add_typer(orgs_app, name="orgs")


class Switch(StrEnum):
    on = "on"
    off = "off"


@orgs_app.command("read-only")
def read_only_command(
    org: Annotated[str, typer.Argument(help="The org's id.", show_default=False)],
    state: Annotated[Switch | None, typer.Argument(
        help="on: block every tool that writes; off: allow them again. Leave out to show "
             "the current mode.", show_default=False)] = None,
    config: ConfigOption = None,
    example: ExampleOption = None,
    database: DatabaseOption = None,
) -> None:
    """Turn an org's read-only mode on or off (or show it).

    While it is on, the readonly_guard hook blocks every tool declared writes=True for the
    org's agents, in every process, from the next call on; no restart is needed.
    """
    from hookgate.storage.database import Database, DatabaseError
    from hookgate.storage.orgs import UnknownOrg, org_read_only, set_org_read_only

    url = database_url(config, example, database)

    async def apply() -> bool | None:
        db = Database(url)
        try:
            await db.upgrade()
            if state is not None:
                await set_org_read_only(db, org, state is Switch.on)
            return await org_read_only(db, org)
        finally:
            await db.dispose()

    try:
        flag = asyncio.run(apply())
    except UnknownOrg:
        flag = None
    except DatabaseError as exc:
        fail(str(exc))
    if flag is None:
        fail(f"no org '{org}' in the database; orgs come from the configuration and are "
             "written there when the server starts (or `hookgate run` runs)")
    if state is None:
        console.print(f"org '{org}' is {'read-only' if flag else 'writable'}")
    elif flag:
        console.print(f"org '{org}' is read-only: tools that write are blocked from the "
                      "next call on")
    else:
        console.print(f"org '{org}' is writable again")
