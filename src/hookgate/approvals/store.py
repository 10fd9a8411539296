"""Reading and writing confirmation requests. Every status change is compare-and-set from
``pending`` in one UPDATE, so the first decision wins on SQLite and PostgreSQL alike."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Text, cast, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from hookgate.approvals.delivery_claims import claim_abandoned, delivery_claim
from hookgate.approvals.records import ConfirmationRequest
from hookgate.storage.database import Database
from hookgate.storage.tables import ConfirmationRequestRow
from hookgate.storage.types import utcnow

#: Work done in the transaction of a status change, with the request as it now is.
AfterTransition = Callable[[AsyncSession, ConfirmationRequest], Awaitable[None]]


def new_request_id() -> str:
    return "cr_" + uuid.uuid4().hex[:24]


class ConfirmationStore:
    """The ``confirmation_requests`` table behind a small typed API."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(self, **fields: Any) -> tuple[ConfirmationRequest, bool]:
        """Insert a pending request; if one exists for (run, tool call), return it instead.

        Returns (request, created).
        """
        row = ConfirmationRequestRow(id=new_request_id(), status="pending", **fields)
        try:
            async with self.db.transaction() as s:
                s.add(row)
        except IntegrityError:
            existing = await self.for_call(fields["run_id"], fields["tool_call_id"])
            if existing is None:
                raise
            return existing, False
        return ConfirmationRequest.from_row(row), True

    async def get(self, request_id: str) -> ConfirmationRequest | None:
        async with self.db.session() as s:
            row = await s.get(ConfirmationRequestRow, request_id)
            return ConfirmationRequest.from_row(row) if row else None

    async def for_call(self, run_id: str, tool_call_id: str) -> ConfirmationRequest | None:
        async with self.db.session() as s:
            row = (await s.execute(
                select(ConfirmationRequestRow).where(
                    ConfirmationRequestRow.run_id == run_id,
                    ConfirmationRequestRow.tool_call_id == tool_call_id,
                )
            )).scalar_one_or_none()
            return ConfirmationRequest.from_row(row) if row else None

    async def transition(
        self,
        request_id: str,
        status: str,
        *,
        responded_by: str | None = None,
        channel_identity: str | None = None,
        reason: str | None = None,
        now: datetime | None = None,
        unexpired: bool = False,
        then: AfterTransition | None = None,
        via: str | None = None,
        edited_args: dict[str, Any] | None = None,
        edited_args_sha256: str | None = None,
        message: str | None = None,
    ) -> ConfirmationRequest | None:
        """Move a pending request to ``status`` and return it as it now is, in one
        statement; None if it was no longer pending (someone else decided first) or, with
        ``unexpired``, if it expired by the database's clock.

        ``then`` runs inside the same transaction once the row changed (the run queue
        enqueues the run's continuation there, so a decision and its wake-up commit
        together). The time of the change is the database's clock on PostgreSQL.
        """
        when: Any = now or (utcnow() if self.db.is_sqlite else func.now())
        cond = [ConfirmationRequestRow.id == request_id,
                ConfirmationRequestRow.status == "pending"]
        if unexpired:
            cond.append(ConfirmationRequestRow.expires_at > when)
        async with self.db.transaction() as s:
            result = await s.execute(
                update(ConfirmationRequestRow)
                .where(*cond)
                .values(status=status, responded_at=when, responded_by=responded_by,
                        responder_channel_identity=channel_identity, reason=reason,
                        decided_via=via, edited_args=edited_args,
                        edited_args_sha256=edited_args_sha256, message=message)
                .returning(ConfirmationRequestRow)
            )
            row = result.scalar_one_or_none()
            if row is None:
                return None
            after = ConfirmationRequest.from_row(row)
            if then is not None:
                await then(s, after)
            return after

    async def claim_delivery(self, request_id: str, *, resumed: bool = False) -> bool:
        """True for the one caller that may send the request's card: the row's delivery
        moves from nothing to this process's claim in one conditional UPDATE, so two
        processes holding the same new request never both send it. A claim its sender
        abandoned (``delivery_claims.claim_abandoned``; ``resumed``: this process resumes
        the request) is taken over the same way: only while it is still that claim."""
        now = await self.db.now()
        t = ConfirmationRequestRow
        mine = delivery_claim(now)
        async with self.db.transaction() as s:
            result = await s.execute(update(t).where(
                t.id == request_id, t.delivery_ref.is_(None)).values(delivery_ref=mine))
            if getattr(result, "rowcount", 0) == 1:
                return True
            held = (await s.execute(select(t.delivery_ref).where(t.id == request_id))
                    ).scalar_one_or_none()
            if not claim_abandoned(held, now, resumed=resumed):
                return False
            token = held.get("claim") if isinstance(held, dict) else None
            as_text = cast(t.delivery_ref, Text)
            same = (as_text.like(f"%{token}%") if isinstance(token, str) and token.isalnum()
                    else as_text.not_like('%"claim"%') & as_text.like('%"sending"%'))
            result = await s.execute(update(t).where(t.id == request_id, same)
                                     .values(delivery_ref=mine))
            return bool(getattr(result, "rowcount", 0) == 1)

    async def set_delivery(self, request_id: str, ref: dict[str, Any]) -> None:
        async with self.db.transaction() as s:
            await s.execute(update(ConfirmationRequestRow)
                            .where(ConfirmationRequestRow.id == request_id)
                            .values(delivery_ref=ref))

    async def list_for_org(
        self,
        *,
        org_id: str | None,
        status: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[ConfirmationRequest]:
        q = select(ConfirmationRequestRow).where(ConfirmationRequestRow.org_id == org_id)
        if status:
            q = q.where(ConfirmationRequestRow.status == status)
        q = q.order_by(ConfirmationRequestRow.created_at.desc()).limit(limit).offset(offset)
        async with self.db.session() as s:
            rows = (await s.execute(q)).scalars().all()
        return [ConfirmationRequest.from_row(r) for r in rows]

    async def decided_since(self, since: datetime) -> list[tuple[str, datetime]]:
        """Ids of requests that left pending at or after ``since`` (the cross-process sweep)."""
        async with self.db.session() as s:
            rows = (await s.execute(
                select(ConfirmationRequestRow.id, ConfirmationRequestRow.responded_at)
                .where(ConfirmationRequestRow.responded_at >= since)
            )).all()
        return [(r[0], r[1]) for r in rows if r[1] is not None]

    async def overdue(self, now: datetime | None = None) -> list[str]:
        """Pending requests past their expiry (by the database's clock unless ``now``)."""
        when: Any = now or (utcnow() if self.db.is_sqlite else func.now())
        async with self.db.session() as s:
            rows = (await s.execute(
                select(ConfirmationRequestRow.id).where(
                    ConfirmationRequestRow.status == "pending",
                    ConfirmationRequestRow.expires_at <= when,
                )
            )).scalars().all()
        return list(rows)

    async def pending_for_run(self, run_id: str) -> list[ConfirmationRequest]:
        """The run's pending requests, its parked children's included."""
        async with self.db.session() as s:
            rows = (await s.execute(
                select(ConfirmationRequestRow).where(
                    or_(ConfirmationRequestRow.run_id == run_id,
                        ConfirmationRequestRow.root_run_id == run_id),
                    ConfirmationRequestRow.status == "pending",
                )
            )).scalars().all()
        return [ConfirmationRequest.from_row(r) for r in rows]

    async def rejected_like(self, run_id: str, tool_name: str, args_sha256: str
                            ) -> ConfirmationRequest | None:
        """The latest request of ``run_id`` a person rejected for this tool and exactly these
        arguments (by digest), if any."""
        async with self.db.session() as s:
            row = (await s.execute(
                select(ConfirmationRequestRow).where(
                    ConfirmationRequestRow.run_id == run_id,
                    ConfirmationRequestRow.tool_name == tool_name,
                    ConfirmationRequestRow.args_sha256 == args_sha256,
                    ConfirmationRequestRow.status == "rejected",
                ).order_by(ConfirmationRequestRow.responded_at.desc()).limit(1)
            )).scalar_one_or_none()
        return ConfirmationRequest.from_row(row) if row is not None else None

    async def declined_by_run(self, run_ids: list[str]) -> dict[str, list[ConfirmationRequest]]:
        """The requests of ``run_ids`` that ended without approval (rejected, expired,
        cancelled), by run: what a run's "completed" must not hide."""
        if not run_ids:
            return {}
        async with self.db.session() as s:
            rows = (await s.execute(
                select(ConfirmationRequestRow).where(
                    ConfirmationRequestRow.run_id.in_(run_ids),
                    ConfirmationRequestRow.status.in_(("rejected", "expired", "cancelled")),
                )
            )).scalars().all()
        out: dict[str, list[ConfirmationRequest]] = {}
        for row in rows:
            out.setdefault(row.run_id, []).append(ConfirmationRequest.from_row(row))
        return out
