"""The ``agents`` table: the declared agents, written at start as upserts (any number of
instances may start at once), each with the definition it was declared with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table

from hookgate.storage.database import Database
from hookgate.storage.tables import AgentRow
from hookgate.storage.types import utcnow
from hookgate.storage.upserts import upsert


@dataclass(frozen=True, slots=True)
class DeclaredAgent:
    """An agent as the configuration declares it."""

    id: str
    org_id: str | None
    name: str
    owner_user_id: str | None
    definition: dict[str, Any]


async def sync_agents(db: Database, agents: Sequence[DeclaredAgent]) -> None:
    """Insert or update ``agents`` (by id), in one transaction."""
    now = utcnow()
    rows = [{"id": a.id, "org_id": a.org_id, "name": a.name, "owner_user_id": a.owner_user_id,
             "updated_at": now, "definition": a.definition} for a in agents]
    async with db.transaction() as s:
        await upsert(s, cast(Table, AgentRow.__table__), rows, key=["id"],
                     update=["org_id", "name", "owner_user_id", "definition", "updated_at"])
