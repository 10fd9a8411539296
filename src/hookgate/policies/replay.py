"""Replay: what a candidate set of policies would have decided about the calls of a period,
beside what was decided then (``hookgate policy replay``).

The facts come from the audit log, which keeps a row for every call (allowed, asked or
blocked): when, tool, agent, user, org, the execution path and the arguments as stored —
with every value under a secret-looking key masked (hooks/withheld.py). A call whose stored
arguments hold a masked value (or a stand-in for arguments JSON could not say) cannot be put
to the candidate as it was made, so it is reported *not replayable*, with the count, never
guessed at. The candidate's decision comes from the caller (the CLI asks the same
``CedarPolicy.decision`` a server and ``hookgate policy test`` ask): this module only reads
rows, says what was decided then, and groups the changes per deciding rule.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from hookgate.hooks.withheld import MASK
from hookgate.tools.arguments import REFUSED_KEY

Effect = Literal["allow", "deny", "ask"]
#: Examples kept per change.
EXAMPLES = 3
#: The columns of an audit row replay reads.
COLUMNS = ("id", "created_at", "tool_name", "agent_id", "user_id", "org_id",
           "execution_path", "args_json", "outcome", "blocked_by", "detail", "approver",
           "request_id")


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One call as the audit log recorded it, and the decision it got then."""

    id: int
    at: datetime
    tool: str
    agent_id: str | None
    user_id: str | None
    org_id: str | None
    execution_path: str | None
    args: dict[str, Any] | None
    args_json: str
    effect: Effect
    #: Why the call cannot be replayed; None when it can.
    not_replayable: str | None = None


@dataclass(frozen=True, slots=True)
class CandidateDecision:
    """What the candidate says about a call: its effect, the rule that decided it (policy
    ids, or ``(default)``), and its explanation."""

    effect: Effect
    rule: str
    explanation: str


def recorded_effect(outcome: str, blocked_by: str | None, approver: str | None,
                    request_id: str | None) -> Effect:
    """What was decided about a call then: asked when a person (or a standing rule in a
    person's stead) decided it, denied when it was blocked otherwise, else allowed."""
    if request_id is not None or approver is not None:
        return "ask"
    if outcome == "blocked":
        return "deny"
    return "allow"


def _masked(value: Any) -> bool:
    if isinstance(value, str):
        return MASK in value
    if isinstance(value, Mapping):
        return any(_masked(v) for v in value.values())
    if isinstance(value, list):
        return any(_masked(v) for v in value)
    return False


def recorded_call(row: Mapping[str, Any]) -> RecordedCall:
    """A row (``COLUMNS``) as a recorded call, marked not replayable when it must be."""
    why: str | None = None
    args: dict[str, Any] | None = None
    try:
        parsed = json.loads(row["args_json"])
    except (TypeError, ValueError):
        parsed = None
    if not isinstance(parsed, dict):
        why = "arguments not stored as a JSON object"
    elif REFUSED_KEY in parsed:
        why = "arguments JSON could not say (stored as a stand-in)"
    elif _masked(parsed):
        why = "arguments stored masked"
    else:
        args = parsed
    if why is None and not (row["agent_id"] and row["user_id"]):
        why = "no agent or user recorded"
    return RecordedCall(
        id=int(row["id"]), at=row["created_at"], tool=str(row["tool_name"]),
        agent_id=row["agent_id"], user_id=row["user_id"], org_id=row["org_id"],
        execution_path=row["execution_path"], args=args, args_json=str(row["args_json"]),
        effect=recorded_effect(str(row["outcome"]), row["blocked_by"], row["approver"],
                               row["request_id"]),
        not_replayable=why)


def in_ci(effect: Effect, ci: bool) -> Effect:
    """``--ci``: nobody is there to ask, so every "ask" is a deny."""
    return "deny" if ci and effect == "ask" else effect


@dataclass(slots=True)
class Change:
    """Past decisions one rule of the candidate would change one way (allow → deny …)."""

    rule: str
    before: Effect
    after: Effect
    count: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "from": self.before, "to": self.after,
                "count": self.count, "examples": self.examples}


@dataclass(slots=True)
class ReplayReport:
    """Every change, per rule and direction, and what could not be replayed."""

    calls: int = 0
    replayed: int = 0
    unchanged: int = 0
    not_replayable: Counter[str] = field(default_factory=Counter)
    changes: dict[tuple[str, str, str], Change] = field(default_factory=dict)
    ci: bool = False

    @property
    def changed(self) -> int:
        return sum(c.count for c in self.changes.values())

    def add(self, call: RecordedCall, decision: CandidateDecision | None,
            why_not: str | None = None) -> None:
        """Count ``call``; ``decision`` None: it could not be replayed (``why_not``)."""
        self.calls += 1
        why = call.not_replayable or why_not
        if decision is None or why is not None:
            self.not_replayable[why or "not replayable"] += 1
            return
        self.replayed += 1
        before, after = in_ci(call.effect, self.ci), in_ci(decision.effect, self.ci)
        if before == after:
            self.unchanged += 1
            return
        key = (decision.rule, before, after)
        change = self.changes.get(key)
        if change is None:
            change = self.changes[key] = Change(decision.rule, before, after)
        change.count += 1
        if len(change.examples) < EXAMPLES:
            change.examples.append({
                "audit_id": call.id, "at": call.at.isoformat(), "tool": call.tool,
                "agent": call.agent_id, "user": call.user_id, "args": call.args,
                "candidate": decision.explanation})

    def sorted_changes(self) -> list[Change]:
        return sorted(self.changes.values(), key=lambda c: (-c.count, c.rule, c.before,
                                                            c.after))

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "replayed": self.replayed, "unchanged": self.unchanged,
                "changed": self.changed, "ci": self.ci,
                "not_replayable": {"count": sum(self.not_replayable.values()),
                                   "why": dict(sorted(self.not_replayable.items()))},
                "changes": [c.as_dict() for c in self.sorted_changes()]}


#: Decides one recorded call with the candidate; raises LookupError when the candidate
#: cannot (an agent or user it does not know): the call is then not replayable.
Decider = Callable[[RecordedCall], Awaitable[CandidateDecision]]


async def replay(calls: Iterable[RecordedCall], decide: Decider, *, ci: bool = False
                 ) -> ReplayReport:
    """The report of ``decide`` over ``calls``."""
    report = ReplayReport(ci=ci)
    for call in calls:
        if call.not_replayable is not None:
            report.add(call, None)
            continue
        try:
            decision = await decide(call)
        except LookupError as exc:
            report.add(call, None, str(exc.args[0] if exc.args else exc))
            continue
        report.add(call, decision)
    return report
