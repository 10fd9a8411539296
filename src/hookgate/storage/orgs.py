"""An org's read-only flag: read on every write call (so a change holds from the next call,
in every process), and set by an org admin through the API or the CLI."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from sqlalchemy import Table, text, update

from hookgate.storage.database import Database
from hookgate.storage.pg_lane import PgLane
from hookgate.storage.sqlite_lane import SqliteLane
from hookgate.storage.tables import Org
from hookgate.storage.types import utcnow
from hookgate.storage.upserts import upsert

_ORGS = cast(Table, Org.__table__)


class UnknownOrg(LookupError):
    """No org with that id in the database."""


_READ_ONLY = "SELECT read_only FROM orgs WHERE id = :org"
_READ_ONLY_PG = "SELECT read_only FROM orgs WHERE id = $1"


async def org_read_only(db: Database, org_id: str) -> bool | None:
    """The org's flag as the database has it now; None when there is no such org."""
    lane = SqliteLane.for_database(db)
    pg = None if lane is not None else PgLane.for_database(db)
    if lane is not None:
        row = await lane.read(lambda c: c.execute(_READ_ONLY, {"org": org_id}).fetchone())
        flag = None if row is None else row[0]
    elif pg is not None:  # one statement in autocommit: no BEGIN/ROLLBACK around it
        row = await pg.fetchrow(_READ_ONLY_PG, org_id)
        flag = None if row is None else row[0]
    else:
        async with db.engine.connect() as conn:
            flag = (await conn.execute(text(_READ_ONLY), {"org": org_id})).scalar_one_or_none()
    return None if flag is None else bool(flag)


async def set_org_read_only(db: Database, org_id: str, read_only: bool) -> None:
    """Set the flag; UnknownOrg when the org is not in the database."""
    async with db.engine.begin() as conn:
        result = await conn.execute(
            update(_ORGS).where(_ORGS.c.id == org_id).values(read_only=read_only))
        if result.rowcount == 0:
            raise UnknownOrg(f"no org '{org_id}' in the database")


async def sync_orgs(db: Database, orgs: Iterable[tuple[str, str, bool]]) -> None:
    """Write the declared (id, name, read_only) orgs: missing ones are inserted with their
    flag; existing ones take the declared name but keep their flag, which is operational
    state (set through the API or CLI) from the moment the org exists."""
    rows = [{"id": org_id, "name": name, "read_only": read_only, "created_at": utcnow()}
            for org_id, name, read_only in orgs]
    async with db.transaction() as s:
        await upsert(s, _ORGS, rows, key=["id"], update=["name"])
