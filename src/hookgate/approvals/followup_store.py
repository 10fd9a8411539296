"""The follow-up columns of ``confirmation_requests``: each reminder and the escalation is
claimed by one compare-and-set UPDATE, so of several instances exactly one sends it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update

from hookgate.approvals.records import ConfirmationRequest
from hookgate.storage.database import Database
from hookgate.storage.tables import ConfirmationRequestRow, User

_Row = ConfirmationRequestRow


class FollowupStore:
    """Claims, records and lists the follow-ups of pending requests."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def claim_reminder(self, request_id: str, sent: int, due: int, now: datetime
                             ) -> ConfirmationRequest | None:
        """Take the reminder after ``sent`` (counting it up to ``due``, the reminders due by
        now) as this process's to send; None when another instance took it first or the
        request is no longer pending."""
        async with self.db.transaction() as s:
            row = (await s.execute(
                update(_Row).where(_Row.id == request_id, _Row.status == "pending",
                                   _Row.reminders_sent == sent)
                .values(reminders_sent=due, last_reminded_at=now)
                .returning(_Row))).scalar_one_or_none()
            return ConfirmationRequest.from_row(row) if row is not None else None

    async def claim_escalation(self, request_id: str, users: list[str], now: datetime
                               ) -> ConfirmationRequest | None:
        """Escalate to ``users`` (they become eligible); None if it escalated already or
        the request is no longer pending."""
        async with self.db.transaction() as s:
            row = (await s.execute(
                update(_Row).where(_Row.id == request_id, _Row.status == "pending",
                                   _Row.escalated_at.is_(None))
                .values(escalated_at=now, escalated_to=users)
                .returning(_Row))).scalar_one_or_none()
            return ConfirmationRequest.from_row(row) if row is not None else None

    async def add_escalation_ref(self, request_id: str, ref: dict[str, Any]) -> None:
        async with self.db.transaction() as s:
            row = await s.get(_Row, request_id, with_for_update=not self.db.is_sqlite)
            if row is not None:
                row.escalation_refs = [*(row.escalation_refs or []), ref]

    async def set_unreachable(self, request_id: str, reason: str | None) -> None:
        """Flag (or, with None, clear) that no approver of the request can be reached."""
        async with self.db.transaction() as s:
            await s.execute(update(_Row).where(_Row.id == request_id)
                            .values(unreachable=reason))

    async def pending_with_followups(self) -> list[ConfirmationRequest]:
        """Pending requests that carry a follow-up policy (to schedule after a start)."""
        async with self.db.session() as s:
            rows = (await s.execute(select(_Row).where(
                _Row.status == "pending", _Row.followup.is_not(None)))).scalars().all()
        return [ConfirmationRequest.from_row(r) for r in rows]

    async def enabled_users(self, org_id: str | None, *, admins_only: bool = False
                            ) -> list[str]:
        q = select(User.id).where(User.org_id == org_id, User.disabled.is_(False))
        if admins_only:
            q = q.where(User.admin.is_(True))
        async with self.db.session() as s:
            return list((await s.execute(q.order_by(User.id))).scalars().all())

    async def user_states(self, user_ids: list[str]) -> dict[str, bool]:
        """``{user id: disabled}`` for the users the database knows."""
        if not user_ids:
            return {}
        async with self.db.session() as s:
            rows = (await s.execute(select(User.id, User.disabled)
                                    .where(User.id.in_(user_ids)))).all()
        return {r[0]: bool(r[1]) for r in rows}

    async def any_users(self) -> bool:
        """Whether the users table is in use (a server); the library runs without it."""
        async with self.db.session() as s:
            return bool((await s.execute(select(func.count()).select_from(User))).scalar_one())
