"""The follow-up columns of ``confirmation_requests`` (reminders, escalation, unreachable
approvers): each reminder and the escalation is claimed by one compare-and-set UPDATE, so
of several instances exactly one sends it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from hookgate.storage.confirmations import ConfirmationRecord, record_of
from hookgate.storage.database import Database
from hookgate.storage.tables import ConfirmationRequestRow

_Row = ConfirmationRequestRow


class FollowupColumns:
    """Claims, records and lists the follow-ups of pending requests."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def claim_reminder(self, request_id: str, sent: int, due: int, now: datetime
                             ) -> ConfirmationRecord | None:
        async with self.db.transaction() as s:
            row = (await s.execute(
                update(_Row).where(_Row.id == request_id, _Row.status == "pending",
                                   _Row.reminders_sent == sent)
                .values(reminders_sent=due, last_reminded_at=now)
                .returning(_Row))).scalar_one_or_none()
            return record_of(row) if row is not None else None

    async def claim_escalation(self, request_id: str, users: list[str], now: datetime
                               ) -> ConfirmationRecord | None:
        async with self.db.transaction() as s:
            row = (await s.execute(
                update(_Row).where(_Row.id == request_id, _Row.status == "pending",
                                   _Row.escalated_at.is_(None))
                .values(escalated_at=now, escalated_to=users)
                .returning(_Row))).scalar_one_or_none()
            return record_of(row) if row is not None else None

    async def add_escalation_ref(self, request_id: str, ref: dict[str, Any]) -> None:
        async with self.db.transaction() as s:
            # The row lock keeps two instances' refs from overwriting each other (a SQLite
            # file has one writer at a time anyway).
            row = await s.get(_Row, request_id, with_for_update=self.db.backend.locks_rows)
            if row is not None:
                row.escalation_refs = [*(row.escalation_refs or []), ref]

    async def set_unreachable(self, request_id: str, reason: str | None) -> None:
        async with self.db.transaction() as s:
            await s.execute(update(_Row).where(_Row.id == request_id)
                            .values(unreachable=reason))

    async def pending_with_followups(self) -> list[ConfirmationRecord]:
        async with self.db.session() as s:
            rows = (await s.execute(select(_Row).where(
                _Row.status == "pending", _Row.followup.is_not(None)))).scalars().all()
        return [record_of(r) for r in rows]
