"""`ConfirmationRequest`: the typed value of one request, as read from the database
(storage/confirmations.py), with what the approvals read from it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hookgate.approvals.context import readable_numbers
from hookgate.approvals.edits import changes
from hookgate.hooks.withheld import shown_changes
from hookgate.storage.confirmations import RECORD_FIELDS, ConfirmationRecord
from hookgate.storage.types import utcnow
from hookgate.tools.calls import CallBinding

if TYPE_CHECKING:
    from hookgate.channels.base import CardOutcome

STATUSES = ("pending", "approved", "rejected", "expired", "cancelled")


@dataclass(slots=True, frozen=True)
class ConfirmationRequest(ConfirmationRecord):
    """A call waiting for (or past) a person's decision, with its full decision record: the
    stored columns (`ConfirmationRecord`, declared once in storage) and what the approvals
    read from them."""

    #: Approvals that no longer count (their voter moved org, was disabled, ...), each with
    #: ``no_longer_counts``; set when shown or counted (approvals/authority.py), never stored.
    discounted: tuple[dict[str, Any], ...] = ()

    @property
    def stored_run_id(self) -> str:
        """The stored run a decision on this request continues."""
        return self.root_run_id or self.run_id

    @classmethod
    def from_record(cls, record: ConfirmationRecord) -> ConfirmationRequest:
        """The request as storage read it (storage/confirmations.py)."""
        return cls(**{name: getattr(record, name) for name in RECORD_FIELDS})

    @property
    def binding(self) -> CallBinding:
        """The one call this request is about: run, call id, tool, agent, argument digest,
        org."""
        return CallBinding(self.run_id, self.tool_call_id, self.tool_name, self.agent_id,
                           self.args_sha256, self.org_id)

    @property
    def approved_binding(self) -> CallBinding:
        """The call an approval lets run: the asked call, with the edited arguments' digest
        when the approver changed them."""
        return CallBinding(self.run_id, self.tool_call_id, self.tool_name, self.agent_id,
                           self.edited_args_sha256 or self.args_sha256, self.org_id)

    @property
    def changes(self) -> list[dict[str, Any]]:
        """What the approver changed (``path``, ``before``, ``after``); [] without edits."""
        return changes(self.args, self.edited_args) if self.edited_args is not None else []

    def card_outcome(self) -> CardOutcome:
        """What a chat card shows once this request is decided."""
        # Imported here: the records load without the channels package and the card wording.
        from hookgate.approvals.card_text import card_edits
        from hookgate.channels.base import CardOutcome

        changes = self.changes
        # A card is read by everyone in the chat: its changes as anyone may see them.
        return CardOutcome(self.id, self.status,  # type: ignore[arg-type]
                           self.responded_by, self.responded_at, self.reason,
                           via=self.decided_via, changes=shown_changes(changes),
                           message=self.message, edits=card_edits(changes))

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    def seconds_left(self, now: datetime | None = None) -> float:
        return max(0.0, (self.expires_at - (now or utcnow())).total_seconds())

    @property
    def approved_by(self) -> list[dict[str, Any]]:
        """Everyone who approved, in order (a single approval is the decision itself)."""
        if self.approvals:
            return [dict(a) for a in self.approvals]
        if self.status == "approved" and self.responded_by:
            return [{"user_id": self.responded_by, "via": self.decided_via,
                     "at": self.responded_at.isoformat() if self.responded_at else None}]
        return []

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "run_id": self.run_id,
            "tool_call_id": self.tool_call_id,
            "agent_id": self.agent_id,
            "requested_by": self.requested_by,
            "org_id": self.org_id,
            "mode": self.mode,
            "channel_id": self.channel_id,
            "approver_scope": self.approver_scope,
            "status": self.status,
            "payload": {"tool_name": self.tool_name, "args": self.args,
                        "args_sha256": self.args_sha256,
                        "edited_args": self.edited_args,
                        "edited_args_sha256": self.edited_args_sha256},
            "changes": self.changes,
            "context": {**(self.context or {}), "numbers": readable_numbers(self.args)},
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "seconds_left": round(self.seconds_left(), 1) if self.pending else 0,
            "decision": {
                "responded_at": self.responded_at.isoformat() if self.responded_at else None,
                "responded_by": self.responded_by,
                "channel_identity": self.responder_channel_identity,
                "reason": self.reason,
                "via": self.decided_via,
                "message": self.message,
            },
            "followup": {
                "reminders_sent": self.reminders_sent,
                "last_reminded_at": _iso(self.last_reminded_at),
                "escalated_at": _iso(self.escalated_at),
                "escalated_to": list(self.escalated_to),
                "on_timeout": (self.followup or {}).get("on_timeout", "expire"),
            },
            "unreachable": self.unreachable,
            "approvals": {
                "required": self.approvals_required,
                "count": len(self.approved_by),
                "approved_by": self.approved_by,
                "allow_self_approval": self.allow_self_approval,
                "no_longer_counting": [dict(a) for a in self.discounted],
            },
        }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None
