"""``hookgate users create | revoke``: add a user with a new API token (printed once, stored
hashed, optionally expiring), or revoke a user's token for good."""

from __future__ import annotations

import asyncio
import re
import secrets
from datetime import datetime, timedelta
from typing import Annotated

import typer

from hookgate.cli.app import app, console, fail
from hookgate.cli.config_source import ConfigOption, ExampleOption
from hookgate.cli.db_cmd import DatabaseOption, database_url

users_app = typer.Typer(help="Users and their API tokens.", no_args_is_help=True)
app.add_typer(users_app, name="users")

_DURATION = re.compile(r"(\d+)([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def _expiry(text: str | None) -> datetime | None:
    from hookgate.storage.types import utcnow

    if text is None:
        return None
    found = _DURATION.fullmatch(text.strip())
    if found is None or int(found.group(1)) == 0:
        fail(f"--expires-in {text!r}: give a positive number with s, m, h or d (e.g. 30d)")
    amount, unit = found.groups()
    return utcnow() + timedelta(**{_UNITS[unit]: int(amount)})


async def _create(url: str, user_id: str, org: str, admin: bool, token: str,
                  expires_at: datetime | None) -> str | None:
    from hookgate.storage.database import Database
    from hookgate.storage.tables import Org, User
    from hookgate.storage.users import token_digest

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
                       token_sha256=token_digest(token), token_expires_at=expires_at))
        return None
    finally:
        await db.dispose()


@users_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="The new user's id.")],
    org: Annotated[str, typer.Option(help="The org the user belongs to.")],
    admin: Annotated[bool, typer.Option(
        "--admin", help="Make the user an org admin (may change the org's settings).")] = False,
    expires_in: Annotated[str | None, typer.Option(
        help="The token stops working after this long: 45m, 12h, 30d.")] = None,
    config: ConfigOption = None,
    example: ExampleOption = None,
    database: DatabaseOption = None,
) -> None:
    """Create a user and print their API token. It is shown only this once."""
    url = database_url(config, example, database)
    expires_at = _expiry(expires_in)
    token = secrets.token_urlsafe(32)
    problem = asyncio.run(_create(url, name, org, admin, token, expires_at))
    if problem:
        fail(problem)
    until = f", valid until {expires_at.isoformat(timespec='seconds')}" if expires_at else ""
    console.print(f"created user '{name}' in org '{org}'{until}. API token (shown once):")
    console.print(token, markup=False, highlight=False)


@users_app.command("revoke")
def revoke(
    name: Annotated[str, typer.Argument(help="The user whose token to revoke.")],
    config: ConfigOption = None,
    example: ExampleOption = None,
    database: DatabaseOption = None,
) -> None:
    """Revoke the user's API token for good, in every server process from the next request.

    The token never signs in again, even if the configuration file still gives it; the
    user needs a new token (a new ``token`` in the file, or ``users create`` for others).
    """
    from hookgate.storage.database import Database, DatabaseError
    from hookgate.storage.users import UnknownUser, revoke_token

    url = database_url(config, example, database)

    async def apply() -> bool:
        db = Database(url)
        try:
            await db.upgrade()
            return await revoke_token(db, name, by="cli")
        finally:
            await db.dispose()

    try:
        had = asyncio.run(apply())
    except (UnknownUser, DatabaseError) as exc:
        fail(str(exc))
    console.print(f"user '{name}': token revoked" if had
                  else f"user '{name}' has no token to revoke")
