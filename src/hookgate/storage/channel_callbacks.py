"""The dedupe keys of chat platforms' callbacks (``channel_callbacks_seen``): a key is
recorded once, so a replayed callback is told apart by the unique key, in any instance."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError

from hookgate.storage.database import Database
from hookgate.storage.tables import ChannelCallbackSeen


async def first_sighting(db: Database, channel_id: str, dedupe_key: str, *,
                         forget_before: datetime | None = None) -> bool:
    """Record ``dedupe_key`` for ``channel_id``: True the first time, False for a key seen
    before (a replay). With ``forget_before``, keys seen before then are dropped too."""
    try:
        async with db.transaction() as s:
            s.add(ChannelCallbackSeen(channel_id=channel_id, dedupe_key=dedupe_key))
            if forget_before is not None:
                await s.execute(delete(ChannelCallbackSeen)
                                .where(ChannelCallbackSeen.seen_at < forget_before))
    except IntegrityError:
        return False
    return True
