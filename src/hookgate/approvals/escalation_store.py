"""The follow-ups of pending requests as `ConfirmationRequest` values: each reminder and the
escalation is claimed by one compare-and-set UPDATE (storage/escalations.py), so of several
instances exactly one sends it; and the people a follow-up may reach."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hookgate.approvals.records import ConfirmationRequest
from hookgate.storage import people
from hookgate.storage.confirmations import ConfirmationRecord
from hookgate.storage.database import Database
from hookgate.storage.escalations import FollowupColumns


def _maybe(record: ConfirmationRecord | None) -> ConfirmationRequest | None:
    return ConfirmationRequest.from_record(record) if record is not None else None


class EscalationStore:
    """Claims, records and lists the follow-ups of pending requests."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.columns = FollowupColumns(db)
        #: Once the users table is seen in use it stays so (users are disabled, never
        #: deleted): not asked again for every new request.
        self._users_in_use = False

    async def claim_reminder(self, request_id: str, sent: int, due: int, now: datetime
                             ) -> ConfirmationRequest | None:
        """Take the reminder after ``sent`` (counting it up to ``due``, the reminders due by
        now) as this process's to send; None when another instance took it first or the
        request is no longer pending."""
        return _maybe(await self.columns.claim_reminder(request_id, sent, due, now))

    async def claim_escalation(self, request_id: str, users: list[str], now: datetime
                               ) -> ConfirmationRequest | None:
        """Escalate to ``users`` (they become eligible); None if it escalated already or
        the request is no longer pending."""
        return _maybe(await self.columns.claim_escalation(request_id, users, now))

    async def add_escalation_ref(self, request_id: str, ref: dict[str, Any]) -> None:
        await self.columns.add_escalation_ref(request_id, ref)

    async def set_unreachable(self, request_id: str, reason: str | None) -> None:
        """Flag (or, with None, clear) that no approver of the request can be reached."""
        await self.columns.set_unreachable(request_id, reason)

    async def pending_with_followups(self) -> list[ConfirmationRequest]:
        """Pending requests that carry a follow-up policy (to schedule after a start)."""
        return [ConfirmationRequest.from_record(r)
                for r in await self.columns.pending_with_followups()]

    async def enabled_users(self, org_id: str | None, *, admins_only: bool = False
                            ) -> list[str]:
        return await people.enabled_users(self.db, org_id, admins_only=admins_only)

    async def user_states(self, user_ids: list[str]) -> dict[str, bool]:
        """``{user id: disabled}`` for the users the database knows."""
        return await people.user_states(self.db, user_ids)

    async def any_users(self) -> bool:
        """Whether the users table is in use (a server); the library runs without it."""
        if not self._users_in_use:
            self._users_in_use = await people.any_users(self.db)
        return self._users_in_use
