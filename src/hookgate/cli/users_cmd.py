"""``hookgate users create``: add a user with a new API token (printed once, stored hashed)."""

from __future__ import annotations

import asyncio
import secrets
from typing import Annotated

import typer

from hookgate.cli.app import app, console, fail
from hookgate.cli.config_source import ConfigOption, ExampleOption
from hookgate.cli.db_cmd import DatabaseOption, database_url

users_app = typer.Typer(help="Users and their API tokens.", no_args_is_help=True)
app.add_typer(users_app, name="users")


async def _create(url: str, user_id: str, org: str, admin: bool, token: str) -> str | None:
    from hookgate.server.deployment import token_digest
    from hookgate.storage.database import Database
    from hookgate.storage.tables import Org, User

    db = Database(url)
    try:
        await db.upgrade()
        async with db.transaction() as s:
            if await s.get(Org, org) is None:
                return (f"org '{org}' does not exist in the database; declare it in the "
                        "configuration and start the server once, or pick an existing org")
            existing = await s.get(User, user_id)
            if existing is not None:
                return f"user '{user_id}' already exists"
            s.add(User(id=user_id, org_id=org, name=user_id, admin=admin,
                       token_sha256=token_digest(token)))
        return None
    finally:
        await db.dispose()


@users_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="The new user's id.")],
    org: Annotated[str, typer.Option(help="The org the user belongs to.")],
    admin: Annotated[bool, typer.Option(
        "--admin", help="Make the user an org admin (may change the org's settings).")] = False,
    config: ConfigOption = None,
    example: ExampleOption = None,
    database: DatabaseOption = None,
) -> None:
    """Create a user and print their API token. It is shown only this once."""
    url = database_url(config, example, database)
    token = secrets.token_urlsafe(32)
    problem = asyncio.run(_create(url, name, org, admin, token))
    if problem:
        fail(problem)
    console.print(f"created user '{name}' in org '{org}'. API token (shown once):")
    console.print(token, markup=False, highlight=False)
