"""The ``confirmation_requests`` table: every statement on a request's decision columns,
each status change compare-and-set from ``pending`` in one UPDATE so the first decision wins
on SQLite and PostgreSQL alike. Callers get `ConfirmationRecord` values, never rows."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Row, Text, cast, or_, select, update
from sqlalchemy.exc import IntegrityError

from hookgate.canonical import canonical_sha256

# The quorum's votes (approval_votes.py) are written and refused as a decision's are.
from hookgate.storage.backends.base import VoteExists as VoteExists
from hookgate.storage.backends.engine_changes import insert_vote as insert_vote
from hookgate.storage.database import Database
from hookgate.storage.tables import ConfirmationRequestRow, ToolExecutionRow
from hookgate.storage.transaction import Transaction, clock

_Row = ConfirmationRequestRow


@dataclass(slots=True, frozen=True)
class ConfirmationRecord:
    """One stored request, its columns as plain values: the fields are declared here once;
    ``approvals.records.ConfirmationRequest`` extends it with the behaviour (bindings, edits,
    the card's outcome) and the approvals that no longer count."""

    id: str
    run_id: str
    tool_call_id: str
    agent_id: str
    requested_by: str | None
    org_id: str | None
    mode: str
    channel_id: str | None
    approver_scope: str
    agent_owner_id: str | None
    status: str
    tool_name: str
    args: dict[str, Any]
    args_sha256: str
    created_at: datetime
    expires_at: datetime
    responded_at: datetime | None
    responded_by: str | None
    responder_channel_identity: str | None
    reason: str | None
    delivery_ref: dict[str, Any] | None
    context: dict[str, Any] | None = None
    decided_via: str | None = None
    #: The escalation policy copied onto the request when it was made, and its progress.
    followup: dict[str, Any] | None = None
    reminders_sent: int = 0
    last_reminded_at: datetime | None = None
    escalated_at: datetime | None = None
    escalated_to: tuple[str, ...] = ()
    escalation_refs: tuple[dict[str, Any], ...] = ()
    unreachable: str | None = None
    #: Set when the approver changed the arguments: what may run instead of ``args``.
    edited_args: dict[str, Any] | None = None
    edited_args_sha256: str | None = None
    #: The approver's words to the model, read with the decision.
    message: str | None = None
    #: Distinct eligible approvals the request needs (quorum), and who gave them so far.
    approvals_required: int = 1
    allow_self_approval: bool = True
    approvals: tuple[dict[str, Any], ...] = ()
    #: A delegated child's request: the stored run the child runs inside (None: the
    #: request's own run is the stored one).
    root_run_id: str | None = None


#: The record's field names, for copying one into a value that extends it.
RECORD_FIELDS = tuple(f.name for f in fields(ConfirmationRecord))


def record_of(row: ConfirmationRequestRow | Row[Any]) -> ConfirmationRecord:
    return ConfirmationRecord(
        id=row.id, run_id=row.run_id, tool_call_id=row.tool_call_id,
        agent_id=row.agent_id, requested_by=row.requested_by, org_id=row.org_id,
        mode=row.mode, channel_id=row.channel_id, approver_scope=row.approver_scope,
        agent_owner_id=row.agent_owner_id, status=row.status, tool_name=row.tool_name,
        args=dict(row.args or {}), args_sha256=row.args_sha256, created_at=row.created_at,
        expires_at=row.expires_at, responded_at=row.responded_at,
        responded_by=row.responded_by,
        responder_channel_identity=row.responder_channel_identity, reason=row.reason,
        delivery_ref=row.delivery_ref, context=row.context, decided_via=row.decided_via,
        followup=row.followup, reminders_sent=row.reminders_sent or 0,
        last_reminded_at=row.last_reminded_at, escalated_at=row.escalated_at,
        escalated_to=tuple(row.escalated_to or ()),
        escalation_refs=tuple(row.escalation_refs or ()), unreachable=row.unreachable,
        edited_args=dict(row.edited_args) if row.edited_args is not None else None,
        edited_args_sha256=row.edited_args_sha256, message=row.message,
        approvals_required=row.approvals_required or 1,
        allow_self_approval=row.allow_self_approval is not False,
        approvals=tuple(row.approvals or ()), root_run_id=row.root_run_id,
    )


def _maybe(row: ConfirmationRequestRow | None) -> ConfirmationRecord | None:
    return record_of(row) if row is not None else None


def _from_columns(columns: dict[str, Any] | None) -> ConfirmationRecord | None:
    """The record of a row a backend read by column (`Backend.request_columns`)."""
    return record_of(SimpleNamespace(**columns)) if columns is not None else None  # type: ignore[arg-type]


#: Work done in the transaction of a status change, with the request as it now is.
InTransaction = Callable[[Transaction, ConfirmationRecord], Awaitable[None]]


def new_request_id() -> str:
    return "cr_" + uuid.uuid4().hex[:24]


class ConfirmationTable:
    """Reads and compare-and-set writes of ``confirmation_requests``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(self, *, then: InTransaction | None = None,
                     **columns: Any) -> tuple[ConfirmationRecord, bool]:
        """Insert a pending request; if one exists for (run, tool call), return it instead.
        Returns (request, created). ``then`` runs in the insert's transaction once the row
        is written (a request that already existed runs nothing)."""
        row = _Row(id=new_request_id(), status="pending", **columns)
        try:
            async with self.db.transaction() as s:
                s.add(row)
                if then is not None:
                    await s.flush()
                    await then(s, record_of(row))
        except IntegrityError:
            existing = await self.for_call(columns["run_id"], columns["tool_call_id"])
            if existing is None:
                raise
            return existing, False
        return record_of(row), True

    async def get(self, request_id: str) -> ConfirmationRecord | None:
        # One read on the backend's fast path (the driver's autocommit statement on
        # PostgreSQL): the latest commit, as an ORM session's read gave it.
        return _from_columns(await self.db.backend.request_columns(request_id))

    async def for_call(self, run_id: str, tool_call_id: str) -> ConfirmationRecord | None:
        async with self.db.session() as s:
            return _maybe((await s.execute(select(_Row).where(
                _Row.run_id == run_id, _Row.tool_call_id == tool_call_id)
            )).scalar_one_or_none())

    async def transition(self, request_id: str, status: str, *, now: datetime | None,
                         unexpired: bool, then: InTransaction | None,
                         vote: dict[str, Any] | None = None,
                         **decision: Any) -> ConfirmationRecord | None:
        """Move a pending request to ``status`` with the ``decision`` columns, in one
        statement; None if it was no longer pending or, with ``unexpired``, expired by the
        database's clock. ``vote``: the decider's row of ``approval_votes`` (its columns
        but the request's id), written with the change (on PostgreSQL in the same
        statement); VoteExists, and nothing changed, if they voted before. ``then`` runs in
        the same transaction once the row changed: the backend's transaction for a change
        (on PostgreSQL its driver's, decision record 0032)."""
        backend = self.db.backend
        async with backend.change_transaction() as tx:
            columns = await backend.change_request(
                tx, request_id, status, now=now, unexpired=unexpired, decision=decision,
                vote=vote)
            after = _from_columns(columns)
            if after is not None and then is not None:
                await then(tx, after)
            return after

    async def claim_delivery(self, request_id: str, mine: dict[str, Any],
                             abandoned: Callable[[Any], bool]) -> bool:
        """Set the delivery to ``mine`` if it is unset, or if the claim held now is one
        ``abandoned`` says its sender gave up (and it is still that claim)."""
        t = _Row
        async with self.db.transaction() as s:
            result = await s.execute(update(t).where(
                t.id == request_id, t.delivery_ref.is_(None)).values(delivery_ref=mine))
            if getattr(result, "rowcount", 0) == 1:
                return True
            held = (await s.execute(select(t.delivery_ref).where(t.id == request_id))
                    ).scalar_one_or_none()
            if not abandoned(held):
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
            await s.execute(update(_Row).where(_Row.id == request_id).values(delivery_ref=ref))

    async def list_for_org(self, *, org_id: str | None, status: str | None, limit: int,
                           offset: int) -> list[ConfirmationRecord]:
        q = select(_Row).where(_Row.org_id == org_id)
        if status:
            q = q.where(_Row.status == status)
        q = q.order_by(_Row.created_at.desc()).limit(limit).offset(offset)
        async with self.db.session() as s:
            rows = (await s.execute(q)).scalars().all()
        return [record_of(r) for r in rows]

    async def decided_since(self, since: datetime) -> list[tuple[str, datetime]]:
        async with self.db.session() as s:
            rows = (await s.execute(select(_Row.id, _Row.responded_at)
                                    .where(_Row.responded_at >= since))).all()
        return [(r[0], r[1]) for r in rows if r[1] is not None]

    async def overdue(self, now: datetime | None = None) -> list[str]:
        when = clock(self.db, now)
        async with self.db.session() as s:
            rows = (await s.execute(select(_Row.id).where(
                _Row.status == "pending", _Row.expires_at <= when))).scalars().all()
        return list(rows)

    async def pending_for_run(self, run_id: str) -> list[ConfirmationRecord]:
        async with self.db.session() as s:
            rows = (await s.execute(select(_Row).where(
                or_(_Row.run_id == run_id, _Row.root_run_id == run_id),
                _Row.status == "pending"))).scalars().all()
        return [record_of(r) for r in rows]

    async def for_call_or_rejected_like(self, run_id: str, tool_call_id: str,
                                        tool_name: str, args_sha256: str
                                        ) -> ConfirmationRecord | None:
        """`for_call`, else the latest rejected request of the run for this tool and these
        arguments, in one read: the call's own request first. A read of the latest commit
        at the moment of the call's use, on the backend's fast path."""
        return _from_columns(await self.db.backend.request_at_use(
            run_id, tool_call_id, tool_name, args_sha256))

    async def declined_of(self, run_ids: list[str]) -> list[ConfirmationRecord]:
        async with self.db.session() as s:
            rows = (await s.execute(select(_Row).where(
                _Row.run_id.in_(run_ids),
                _Row.status.in_(("rejected", "expired", "cancelled")),
            ))).scalars().all()
        return [record_of(r) for r in rows]

    async def given_up_unused(self, run_id: str) -> list[ConfirmationRecord]:
        """The requests of ``run_id`` whose call gave up waiting (its `ApprovalUse.GAVE_UP`
        entry claimed) that are pending, or approved and not yet used (no `ApprovalUse.USE`
        entry), oldest first: what an identical retry may join (whether it is one:
        hookgate.hooks.coverage)."""
        t, x = _Row, ToolExecutionRow
        async with self.db.session() as s:
            keys = set((await s.execute(select(x.tool_call_id).where(
                x.run_id == run_id,
                or_(x.tool_call_id.startswith(APPROVAL_ENTRY_PREFIX, autoescape=True),
                    x.tool_call_id.startswith(_LEGACY_USE_PREFIX, autoescape=True)),
            ))).scalars().all())
            if not keys:
                return []
            rows = (await s.execute(select(t).where(
                t.run_id == run_id, t.status.in_(("pending", "approved")),
            ).order_by(t.created_at))).scalars().all()
        given = [r for r in rows
                 if ApprovalEntry(ApprovalUse.GAVE_UP, r.id).key in keys
                 and not keys & set(ApprovalEntry(ApprovalUse.USE, r.id).keys_used)]
        return [record_of(r) for r in given[:_GIVEN_UP_READ]]


class ApprovalUse(enum.Enum):
    """What an execution-ledger entry (under the request's run) says of an approval."""

    #: Claimed by the one execution that uses the approval.
    USE = "approval-use"
    #: The request's call gave up waiting for it (an identical retry may join it).
    GAVE_UP = "approval-gave-up"


#: What every `ApprovalEntry` key starts with.
APPROVAL_ENTRY_PREFIX = "approval-"
#: The use key before typed keys (``approval:<request id>``): a use recorded under it
#: still counts, so an approval used before an upgrade is not used again after it.
_LEGACY_USE_PREFIX = "approval:"
#: The most given-up requests of one run a retry looks at.
_GIVEN_UP_READ = 50


@dataclass(frozen=True, slots=True)
class ApprovalEntry:
    """A typed execution-ledger key about one request's approval: the kind, then a hash of
    the canonical JSON of (kind, request id), never a string joined with a separator."""

    kind: ApprovalUse
    request_id: str

    @property
    def key(self) -> str:
        return (f"{self.kind.value}-"
                f"{canonical_sha256([self.kind.value, self.request_id])[:40]}")

    @property
    def keys_used(self) -> tuple[str, ...]:
        """The keys a recorded entry of this kind may be under (the legacy use key too)."""
        if self.kind is ApprovalUse.USE:
            return (self.key, _LEGACY_USE_PREFIX + self.request_id)
        return (self.key,)
