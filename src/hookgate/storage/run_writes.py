"""The run layer's hot writes: a checkpoint (the ``runs`` row) with the events emitted
since the last write, and event batches alone, each in ONE transaction under the run's
fence. The database's backend (``Database.backend``, storage/backends/) runs them on its
fast path; this module holds what they write, whichever database it is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hookgate.engines.events import RunEvent
from hookgate.storage.backends.statements import CHECKPOINT_COLUMNS

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from hookgate.storage.backends.base import AlongWrite, ClaimRow, LedgerFinish, PriorRow
    from hookgate.storage.database import Database
    from hookgate.storage.fencing import Fence

__all__ = ["CHECKPOINT_COLUMNS", "RUN_EVENTS_CHANNEL", "Checkpoint", "checkpoint_row",
           "event_data_text", "events_note", "write_in_session", "write_run"]

#: NOTIFY channel whose payload is the id of a run that has new events.
RUN_EVENTS_CHANNEL = "hookgate_run_events"


def events_note(run_id: str, events: Sequence[RunEvent]) -> str:
    """The notification of a write of ``events``: ``RUN_ID SEQ``, the highest seq written
    (a follower that has it already reads nothing)."""
    return f"{run_id} {max(e.seq for e in events)}"


_STATE_JSON = CHECKPOINT_COLUMNS.index("state_json")


@dataclass(slots=True, frozen=True)
class Checkpoint:
    """A run's row as a checkpoint writes it (the stored state is ``state_json``)."""

    values: tuple[Any, ...]  # in CHECKPOINT_COLUMNS' order

    @property
    def run_id(self) -> str:
        return str(self.values[0])

    @property
    def state_json(self) -> str:
        return str(self.values[_STATE_JSON])

    def as_dict(self) -> dict[str, Any]:
        return dict(zip(CHECKPOINT_COLUMNS, self.values, strict=True))


def event_data_text(event: RunEvent) -> str:
    """An event's data as the JSON column stores it (SQLAlchemy's JSON type's default)."""
    return json.dumps(event.data)


def checkpoint_row(checkpoint: Checkpoint, at: datetime | str, *,
                   fence: int = 0) -> tuple[Any, ...]:
    """The upsert's parameters (statements.CHECKPOINT_PARAMS): updated_at is the write's
    time; created_at and ``fence`` only count for a new row (0: no executor has taken it
    yet)."""
    return (*checkpoint.values[:-1], at, at, fence)


async def write_run(db: Database, run_id: str, *, checkpoint: Checkpoint | None,
                    events: Sequence[RunEvent], fence: Fence | None,
                    finishes: Sequence[LedgerFinish] = (), claim: ClaimRow | None = None,
                    along: AlongWrite | None = None) -> PriorRow | None:
    """Store ``checkpoint`` and ``events`` (a seq already stored is kept as it was) in one
    transaction, only while ``fence`` (if any) is current (else Fenced, nothing stored).
    The commit wakes the run's followers in other instances when there are events.
    ``finishes``, ``claim`` and ``along`` ride in the same transaction (a backend that
    ``carries_ledger`` only): the earlier claim's record if the call was claimed before."""
    if checkpoint is None and not events:
        return None
    return await db.backend.write_run(run_id, checkpoint=checkpoint, events=events,
                                      fence=fence, finishes=finishes, claim=claim,
                                      along=along)


async def write_in_session(db: Database, s: AsyncSession, run_id: str, *,
                           checkpoint: Checkpoint | None, events: Sequence[RunEvent],
                           fence: Fence | None) -> None:
    """`write_run` inside the caller's SQLAlchemy transaction (e.g. with a queued job)."""
    await db.backend.write_in_session(s, run_id, checkpoint=checkpoint, events=events,
                                      fence=fence)
