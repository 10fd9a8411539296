"""An org's read-only flag: read on every write call (so a change holds from the next call,
in every process), and set by an org admin through the API or the CLI."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from sqlalchemy import Table, update

from hookgate.storage.database import Database
from hookgate.storage.tables import Org
from hookgate.storage.types import utcnow
from hookgate.storage.upserts import upsert

_ORGS = cast(Table, Org.__table__)


class UnknownOrg(LookupError):
    """No org with that id in the database."""


async def org_read_only(db: Database, org_id: str) -> bool | None:
    """The org's flag as the database has it now; None when there is no such org."""
    return await db.backend.org_read_only(org_id)


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
