"""Reading and writing confirmation requests as `ConfirmationRequest` values. Every status
change is compare-and-set from ``pending`` (storage/confirmations.py), so the first decision
wins on SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from hookgate.approvals.delivery_claims import claim_abandoned, delivery_claim
from hookgate.approvals.records import ConfirmationRequest
from hookgate.storage.confirmations import ConfirmationRecord, ConfirmationTable, new_request_id
from hookgate.storage.database import Database
from hookgate.storage.transaction import Transaction

#: Work done in the transaction of a status change, with the request as it now is.
AfterTransition = Callable[[Transaction, ConfirmationRequest], Awaitable[None]]

__all__ = ["AfterTransition", "ConfirmationStore", "new_request_id"]


def _maybe(record: ConfirmationRecord | None) -> ConfirmationRequest | None:
    return ConfirmationRequest.from_record(record) if record is not None else None


class ConfirmationStore:
    """The ``confirmation_requests`` table behind a small typed API."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.table = ConfirmationTable(db)

    async def create(self, *, then: AfterTransition | None = None,
                     **fields: Any) -> tuple[ConfirmationRequest, bool]:
        """Insert a pending request; if one exists for (run, tool call), return it instead.

        Returns (request, created). ``then`` runs in the insert's transaction, with the new
        request, once the row is written.
        """
        async def as_request(tx: Transaction, record: ConfirmationRecord) -> None:
            assert then is not None
            await then(tx, ConfirmationRequest.from_record(record))

        record, created = await self.table.create(
            then=as_request if then is not None else None, **fields)
        return ConfirmationRequest.from_record(record), created

    async def get(self, request_id: str) -> ConfirmationRequest | None:
        return _maybe(await self.table.get(request_id))

    async def for_call(self, run_id: str, tool_call_id: str) -> ConfirmationRequest | None:
        return _maybe(await self.table.for_call(run_id, tool_call_id))

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
        vote: dict[str, Any] | None = None,
    ) -> ConfirmationRequest | None:
        """Move a pending request to ``status`` and return it as it now is, in one
        statement; None if it was no longer pending (someone else decided first) or, with
        ``unexpired``, if it expired by the database's clock.

        ``then`` runs inside the same transaction once the row changed (the run queue
        enqueues the run's continuation there, so a decision and its wake-up commit
        together). The time of the change is the database's clock on PostgreSQL.
        ``vote``: the decider's vote, written with the change (``approval_votes``' columns
        but the request's id); VoteExists, and nothing changed, if they voted before.
        """
        async def as_request(tx: Transaction, record: ConfirmationRecord) -> None:
            assert then is not None
            await then(tx, ConfirmationRequest.from_record(record))

        record = await self.table.transition(
            request_id, status, now=now, unexpired=unexpired,
            then=as_request if then is not None else None, vote=vote,
            responded_by=responded_by, responder_channel_identity=channel_identity,
            reason=reason, decided_via=via, edited_args=edited_args,
            edited_args_sha256=edited_args_sha256, message=message)
        return _maybe(record)

    async def claim_delivery(self, request_id: str, *, resumed: bool = False) -> bool:
        """True for the one caller that may send the request's card: the row's delivery
        moves from nothing to this process's claim in one conditional UPDATE, so two
        processes holding the same new request never both send it. A claim its sender
        abandoned (``delivery_claims.claim_abandoned``; ``resumed``: this process resumes
        the request) is taken over the same way: only while it is still that claim."""
        now = await self.db.now()
        return await self.table.claim_delivery(
            request_id, delivery_claim(now),
            lambda held: claim_abandoned(held, now, resumed=resumed))

    async def set_delivery(self, request_id: str, ref: dict[str, Any]) -> None:
        await self.table.set_delivery(request_id, ref)

    async def list_for_org(
        self,
        *,
        org_id: str | None,
        status: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[ConfirmationRequest]:
        records = await self.table.list_for_org(org_id=org_id, status=status, limit=limit,
                                                offset=offset)
        return [ConfirmationRequest.from_record(r) for r in records]

    async def decided_since(self, since: datetime) -> list[tuple[str, datetime]]:
        """Ids of requests that left pending at or after ``since`` (the cross-process sweep)."""
        return await self.table.decided_since(since)

    async def overdue(self, now: datetime | None = None) -> list[str]:
        """Pending requests past their expiry (by the database's clock unless ``now``)."""
        return await self.table.overdue(now)

    async def pending_for_run(self, run_id: str) -> list[ConfirmationRequest]:
        """The run's pending requests, its parked children's included."""
        return [ConfirmationRequest.from_record(r)
                for r in await self.table.pending_for_run(run_id)]

    async def for_call_or_rejected_like(self, run_id: str, tool_call_id: str,
                                        tool_name: str, args_sha256: str
                                        ) -> ConfirmationRequest | None:
        """The call's own request if it has one, else the latest request of ``run_id`` a
        person rejected for this tool and exactly these arguments (by digest), if any: one
        read (the call's own is the one whose ``tool_call_id`` is ``tool_call_id``)."""
        return _maybe(await self.table.for_call_or_rejected_like(
            run_id, tool_call_id, tool_name, args_sha256))

    async def declined_by_run(self, run_ids: list[str]) -> dict[str, list[ConfirmationRequest]]:
        """The requests of ``run_ids`` that ended without approval (rejected, expired,
        cancelled), by run: what a run's "completed" must not hide."""
        if not run_ids:
            return {}
        out: dict[str, list[ConfirmationRequest]] = {}
        for record in await self.table.declined_of(run_ids):
            out.setdefault(record.run_id, []).append(ConfirmationRequest.from_record(record))
        return out

    async def given_up_unused(self, run_id: str) -> list[ConfirmationRequest]:
        """The pending, or approved and unused, requests of ``run_id`` whose call gave up
        waiting, oldest first: what an identical retry may join (hookgate.hooks.coverage
        decides whether a call is one)."""
        return [ConfirmationRequest.from_record(r)
                for r in await self.table.given_up_unused(run_id)]
