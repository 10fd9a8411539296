"""Reads through SQLAlchemy's engine (Core, an ORM session for the connection): a backend
whose fast path has no cheaper read of these rows takes them from here (SQLite: its reads are
local, and its driver's connection is kept for writes). The PostgreSQL backend reads the same
rows on its driver (postgresql.py), one statement in autocommit each."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Table, select

from hookgate.storage.tables import ConfirmationRequestRow

if TYPE_CHECKING:
    from hookgate.storage.database import Database

_REQUESTS = cast(Table, ConfirmationRequestRow.__table__)


class EngineReads:
    """`Backend.request_columns` and `request_at_use` in SQLAlchemy Core."""

    db: Database

    async def request_columns(self, request_id: str) -> dict[str, Any] | None:
        async with self.db.session() as s:
            row = (await s.execute(select(_REQUESTS).where(_REQUESTS.c.id == request_id))
                   ).one_or_none()
        return None if row is None else dict(row._mapping)

    async def request_at_use(self, run_id: str, tool_call_id: str, tool_name: str,
                             args_sha256: str) -> dict[str, Any] | None:
        t = _REQUESTS.c
        own = t.tool_call_id == tool_call_id
        async with self.db.session() as s:
            row = (await s.execute(select(_REQUESTS).where(
                t.run_id == run_id,
                own | ((t.tool_name == tool_name) & (t.args_sha256 == args_sha256)
                       & (t.status == "rejected")),
            ).order_by(own.desc(), t.responded_at.desc()).limit(1))).one_or_none()
        return None if row is None else dict(row._mapping)
