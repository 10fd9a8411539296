"""The ``approval_rules`` table: standing rules as `StandingRule` values, and the statements
that keep each use honest (a rule revoked, suspended or expired a moment ago, by the
database's clock, is not used). What a rule may cover is decided in approvals/rules.py."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, or_, select, update

from hookgate.storage.database import Database
from hookgate.storage.tables import ApprovalRuleRow, RunRow
from hookgate.storage.transaction import Transaction, clock, insert_row
from hookgate.storage.types import utcnow

_Rule = ApprovalRuleRow


@dataclass(frozen=True, slots=True)
class StandingRule:
    """A stored rule, as read from ``approval_rules``."""

    id: str
    org_id: str | None
    agent_id: str
    tool_name: str
    scope: str
    run_id: str | None
    user_id: str | None
    when: str | None
    created_by: str
    created_at: datetime
    expires_at: datetime | None
    from_request_id: str | None
    revoked_at: datetime | None
    revoked_by: str | None
    uses: int
    last_used_at: datetime | None
    #: Set while the rule is suspended (its creator's token was revoked): why, and since when.
    suspended_at: datetime | None = None
    suspended_reason: str | None = None
    #: ``shadow``: it never decides a call, only records that it would have allowed it;
    #: ``enforce``: it decides (approvals.rules reads any other value as not deciding).
    mode: str = "enforce"

    @classmethod
    def from_row(cls, row: ApprovalRuleRow) -> StandingRule:
        return cls(row.id, row.org_id, row.agent_id, row.tool_name, row.scope, row.run_id,
                   row.user_id, row.when, row.created_by, row.created_at, row.expires_at,
                   row.from_request_id, row.revoked_at, row.revoked_by, row.uses or 0,
                   row.last_used_at, row.suspended_at, row.suspended_reason,
                   row.mode or "enforce")

    def active(self, now: datetime | None = None) -> bool:
        return self.revoked_at is None and self.suspended_at is None and (
            self.expires_at is None or self.expires_at > (now or utcnow()))

    def describe(self) -> str:
        """``approved by rule ar_…, created by alice``: how every use is recorded."""
        return f"approved by rule {self.id}, created by {self.created_by}"

    def to_dict(self) -> dict[str, Any]:
        def at(value: datetime | None) -> str | None:
            return value.isoformat() if value else None

        return {
            "id": self.id, "org_id": self.org_id, "agent_id": self.agent_id,
            "tool_name": self.tool_name, "scope": self.scope, "run_id": self.run_id,
            "user_id": self.user_id, "when": self.when, "created_by": self.created_by,
            "created_at": at(self.created_at), "expires_at": at(self.expires_at),
            "from_request_id": self.from_request_id, "revoked_at": at(self.revoked_at),
            "revoked_by": self.revoked_by, "uses": self.uses,
            "last_used_at": at(self.last_used_at), "active": self.active(),
            "suspended_at": at(self.suspended_at), "suspended_reason": self.suspended_reason,
            "mode": self.mode,
        }


@dataclass(frozen=True, slots=True)
class RunOwner:
    """Whose a stored run is: its org, agent and user."""

    org_id: str | None
    agent_id: str
    user_id: str | None


_COLUMNS = ("id", "org_id", "agent_id", "tool_name", "scope", "run_id", "user_id", "when",
            "created_by", "created_at", "expires_at", "from_request_id", "revoked_at",
            "revoked_by", "uses", "last_used_at", "suspended_at", "suspended_reason", "mode")


async def insert_in(tx: Transaction, rule: StandingRule) -> None:
    """Store ``rule`` in ``tx`` (it commits with whatever else ``tx`` does): one INSERT,
    sent now (a refusal fails ``tx``), in a session or in a decision's driver transaction."""
    await insert_row(tx, cast(Table, _Rule.__table__), {c: getattr(rule, c) for c in _COLUMNS})


class RuleTable:
    """Reads and conditional writes of ``approval_rules``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def insert(self, rule: StandingRule) -> None:
        async with self.db.transaction() as tx:
            await insert_in(tx, rule)

    async def get(self, rule_id: str) -> StandingRule | None:
        async with self.db.session() as s:
            row = await s.get(_Rule, rule_id)
        return StandingRule.from_row(row) if row is not None else None

    async def of_org(self, org_id: str | None, *, active_only: bool) -> list[StandingRule]:
        q = select(_Rule).where(_Rule.org_id == org_id)
        if active_only:
            q = q.where(_Rule.revoked_at.is_(None), _Rule.suspended_at.is_(None), or_(
                _Rule.expires_at.is_(None), _Rule.expires_at > clock(self.db)))
        async with self.db.session() as s:
            rows = (await s.execute(q.order_by(_Rule.created_at.desc()))).scalars().all()
        return [StandingRule.from_row(r) for r in rows]

    async def revoke(self, rule_id: str, by: str) -> None:
        async with self.db.transaction() as s:
            await s.execute(update(_Rule).where(_Rule.id == rule_id, _Rule.revoked_at.is_(None))
                            .values(revoked_at=clock(self.db), revoked_by=by))

    async def set_mode(self, rule_id: str, mode: str) -> bool:
        """Switch an unrevoked rule's ``mode``; False when it was revoked meanwhile."""
        async with self.db.transaction() as s:
            done = await s.execute(update(_Rule).where(_Rule.id == rule_id,
                                                       _Rule.revoked_at.is_(None))
                                   .values(mode=mode))
        return bool(getattr(done, "rowcount", 0) == 1)

    async def lift_suspension(self, rule_id: str) -> None:
        async with self.db.transaction() as s:
            await s.execute(update(_Rule).where(_Rule.id == rule_id)
                            .values(suspended_at=None, suspended_reason=None))

    async def unrevoked_for(self, org_id: str | None, agent_id: str, tool_name: str
                            ) -> list[StandingRule]:
        """The rules for this org, agent and tool that are neither revoked nor expired by
        the database's clock, oldest first (suspended ones included: the caller says why)."""
        now = clock(self.db)
        t = _Rule
        async with self.db.session() as s:
            rows = (await s.execute(select(t).where(
                t.org_id == org_id, t.agent_id == agent_id, t.tool_name == tool_name,
                t.revoked_at.is_(None), or_(t.expires_at.is_(None), t.expires_at > now),
            ).order_by(t.created_at))).scalars().all()
        return [StandingRule.from_row(r) for r in rows]

    async def use(self, rule_id: str) -> StandingRule | None:
        """Count one use, only while the rule is active; None when it no longer is."""
        now = clock(self.db)
        t = _Rule
        async with self.db.transaction() as s:
            row = (await s.execute(
                update(t).where(t.id == rule_id, t.revoked_at.is_(None),
                                t.suspended_at.is_(None),
                                or_(t.expires_at.is_(None), t.expires_at > now))
                .values(uses=t.uses + 1, last_used_at=now).returning(t)
            )).scalar_one_or_none()
        return StandingRule.from_row(row) if row is not None else None

    async def run_owner(self, run_id: str) -> RunOwner | None:
        async with self.db.session() as s:
            run = await s.get(RunRow, run_id)
        return RunOwner(run.org_id, run.agent_id, run.user_id) if run is not None else None
