"""The ``channels`` table: each declared channel with its config as the sealed (encrypted)
text runtime/channel_records.py made of it. Storage never sees a config in the clear."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from sqlalchemy import Table, select, update

from hookgate.storage.database import Database
from hookgate.storage.tables import ChannelRow
from hookgate.storage.upserts import upsert


@dataclass(frozen=True, slots=True)
class StoredChannel:
    """One channel row: ``sealed_config`` is the encrypted config ("" when none)."""

    id: str
    type: str
    org_id: str
    enabled: bool
    sealed_config: str
    position: int = 0


async def write_channels(db: Database, channels: Sequence[StoredChannel]) -> None:
    """Upsert ``channels``; rows of channels not among them are kept but disabled."""
    rows = [{"id": c.id, "org_id": c.org_id, "type": c.type, "enabled": c.enabled,
             "position": c.position, "config_encrypted": c.sealed_config} for c in channels]
    async with db.transaction() as s:
        await upsert(s, cast(Table, ChannelRow.__table__), rows, key=["id"],
                     update=["org_id", "type", "enabled", "position", "config_encrypted"])
        await s.execute(update(ChannelRow).where(ChannelRow.id.not_in([r["id"] for r in rows]))
                        .values(enabled=False))


async def read_channels(db: Database) -> list[StoredChannel]:
    """Every stored channel, in declaration order."""
    async with db.session() as s:
        rows = (await s.execute(select(ChannelRow).order_by(ChannelRow.position))).scalars()
        return [StoredChannel(r.id, r.type, r.org_id, r.enabled, r.config_encrypted or "",
                              r.position) for r in rows]


async def reseal_all(db: Database, reseal: Callable[[str, str], str]) -> int:
    """Replace every sealed config by ``reseal(sealed, channel_id)``, all in one
    transaction (an exception from ``reseal`` changes nothing); the count resealed."""
    async with db.transaction() as s:
        rows = (await s.execute(select(ChannelRow))).scalars().all()
        for row in rows:
            if row.config_encrypted:
                row.config_encrypted = reseal(row.config_encrypted, row.id)
        return sum(1 for row in rows if row.config_encrypted)
