"""Standing rules ("approve and remember"): an eligible approver's decision that calls of one
agent's tool are approved without asking, within a scope (one run, this agent for one user,
this agent for the whole org), until an expiry, and only while the arguments satisfy an
optional ``when`` constraint in the declarative hooks' language (`hookgate.expressions`,
never eval).

The gate consults them before it creates a request. A rule matches only when every check
holds again at the moment of use (not revoked, not suspended, not expired by the database's
clock, its creator still eligible by their current record under the same check a live
decision gets (approvals/authority.py), no quorum or four eyes it would bypass, its ``when``
true); anything else, including a ``when`` that cannot be evaluated, asks a person. Revoking
a creator's token suspends their rules until an admin enables them again. A rule in shadow
mode (``mode: shadow``) is matched the same way and never decides: that it would have
allowed the call is recorded (hookgate.policies.shadow) and a person is asked; switching it
to ``enforce`` is an update (`RuleBook.set_mode`).
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hookgate.agent import Agent
from hookgate.approvals import authority
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.errors import ApprovalError
from hookgate.approvals.service import ApprovalAsk
from hookgate.hooks.errors import HookBuildError
from hookgate.matching import Condition
from hookgate.policies.shadow import Mode, ShadowDecision, mode_of
from hookgate.storage.approval_rules import RuleTable, StandingRule, insert_in
from hookgate.storage.database import Database
from hookgate.storage.transaction import Transaction
from hookgate.storage.types import utcnow

__all__ = ["MAX_EXPIRES_IN_S", "MAX_WHEN_CHARS", "RULE_SCOPES", "RuleBook", "RuleDraft",
           "RuleInvalid", "RuleNotFound", "RuleRefused", "StandingRule", "kept_shadow",
           "may_cover", "parse_mode", "parse_when"]

#: ``run``: this run only; ``agent_user``: this agent for one user; ``org``: this agent for
#: every user of its org.
RULE_SCOPES = ("run", "agent_user", "org")
#: The longest a rule may live, in seconds (a year); no expiry means until revoked.
MAX_EXPIRES_IN_S = 366 * 86_400
MAX_WHEN_CHARS = 2000


class RuleRefused(ApprovalError):
    """The person may not create (or revoke) this rule: it covers what they cannot approve."""


class RuleInvalid(ApprovalError):
    """The rule as asked is malformed: scope, tool, run, expiry or ``when``."""


class RuleNotFound(ApprovalError):
    """No standing rule with that id in the caller's org."""


@dataclass(frozen=True, slots=True)
class RuleDraft:
    """What a person asks to remember; `RuleBook.create` checks it before storing it."""

    agent_id: str
    tool_name: str
    scope: str
    run_id: str | None = None
    user_id: str | None = None
    when: str | None = None
    expires_in_s: float | None = None
    from_request_id: str | None = None
    #: ``shadow``: the rule only records that it would have allowed a call; ``enforce``
    #: (None: the default) decides.
    mode: object = None


def parse_mode(mode: object) -> Mode:
    """A rule's ``mode``: ``enforce`` (None too) or ``shadow``; RuleInvalid else."""
    try:
        return mode_of(mode, "standing rule")
    except HookBuildError as exc:
        raise RuleInvalid(str(exc)) from None


#: The key of a request's stored context under which the standing rules in shadow mode that
#: would have approved its call are kept, as they were when it was asked.
SHADOW_KEY = "shadow_rules"


def stored_shadow(decisions: list[ShadowDecision]) -> list[dict[str, str]]:
    """The shadow rules' decisions as a request stores them (`SHADOW_KEY`)."""
    return [{"rule": d.rule, "effect": d.effect, "why": d.why} for d in decisions]


def kept_shadow(context: Mapping[str, Any] | None) -> list[ShadowDecision]:
    """The shadow rules' decisions a request's stored ``context`` kept (`stored_shadow`)."""
    kept = (context or {}).get(SHADOW_KEY)
    if not isinstance(kept, list):
        return []
    return [ShadowDecision(str(d["rule"]), "allow", str(d.get("why") or ""))
            for d in kept if isinstance(d, Mapping) and d.get("rule")
            and d.get("effect") == "allow"]


def recorded_again(ask: ApprovalAsk, context: Mapping[str, Any] | None) -> None:
    """Record on ``ask``'s call the shadow rules' decisions its request stored when it was
    made (counted then): the call resumed with its decision (same or another process), and
    its audit row says what they would have decided when it was asked."""
    decisions = kept_shadow(context)
    if decisions and ask.on_shadow is not None:
        ask.on_shadow(decisions, False)


def parse_when(when: str | None) -> Condition | None:
    """The rule's constraint, parsed; RuleInvalid says what is wrong with it."""
    if when is None:
        return None
    if len(when) > MAX_WHEN_CHARS:
        raise RuleInvalid(f"'when' is longer than {MAX_WHEN_CHARS} characters")
    try:
        return Condition(when)
    except HookBuildError as exc:
        raise RuleInvalid(str(exc)) from None


def may_cover(agent: Agent, creator: str, requester: str | None) -> str | None:
    """Why ``creator`` could not approve a call of ``agent`` requested by ``requester``
    (None when they could), by the agent's approver scope and four eyes: the authority's
    check, with the creator taken as a member of the agent's org."""
    seat = authority.Seat.of_agent(agent, agent.org_id, requester)
    return authority.refusal(seat, authority.Person(creator, agent.org_id))


#: The shape of a tool name that comes from outside the agent's own list (Claude Code's
#: tools, the MCP gateway's ``mcp__<server>__<tool>``): plain ASCII, no spaces.
_EXTERNAL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,255}")


def _callable_name(agent: Agent, name: str) -> bool:
    """Whether ``agent`` can call a tool named exactly ``name``: one of its tools, or (for an
    agent whose tools come from outside) a well-formed external name."""
    if name in agent.toolbox():
        return True
    if not _EXTERNAL_NAME.fullmatch(name):
        return False
    # The coding agents' section, under either of its names (external.coding.policy.SECTIONS).
    external = any(name in (agent.model_config_json or {})
                   for name in ("coding_agents", "claude_code"))
    return external or (name.startswith("mcp__") and name.count("__") >= 2)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, Mapping):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(v) for v in value)
    return True


class RuleBook:
    """The ``approval_rules`` table: create, list, revoke, and match a call."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.table = RuleTable(db)

    async def create(self, draft: RuleDraft, agent: Agent, who: Approver) -> StandingRule:
        """Store ``draft`` as ``who``'s rule after checking they may (`prepare`)."""
        return await self.save(await self.prepare(draft, agent, who))

    async def save(self, rule: StandingRule) -> StandingRule:
        await self.table.insert(rule)
        return rule

    @staticmethod
    async def save_in(tx: Transaction, rule: StandingRule) -> None:
        """Store a prepared rule in ``tx``: it commits with the decision that made it."""
        await insert_in(tx, rule)

    async def prepare(self, draft: RuleDraft, agent: Agent, who: Approver) -> StandingRule:
        """``draft`` as ``who``'s rule, not yet stored; RuleInvalid for a
        malformed draft, RuleRefused when ``who`` could not approve what it covers."""
        if who.org_id != agent.org_id:
            raise RuleRefused(f"agent '{agent.id}' is not in org '{who.org_id}'")
        if not _callable_name(agent, draft.tool_name):
            # Exact names only: a look-alike name would be a rule for nothing, or for
            # something nobody meant.
            raise RuleInvalid(f"agent '{agent.id}' has no tool {draft.tool_name!r} "
                              f"(its tools: {', '.join(sorted(agent.toolbox())) or 'none'})")
        parse_when(draft.when)
        mode = parse_mode(draft.mode)
        if draft.scope not in RULE_SCOPES:
            raise RuleInvalid(f"scope must be one of {', '.join(RULE_SCOPES)}, "
                              f"not {draft.scope!r}")
        expires_at = None
        if draft.expires_in_s is not None:
            if not (0 < draft.expires_in_s <= MAX_EXPIRES_IN_S):
                raise RuleInvalid(f"expires_in must be between 1 and {MAX_EXPIRES_IN_S} "
                                  "seconds")
            expires_at = await self.db.now() + timedelta(seconds=draft.expires_in_s)
        run_id, user_id = await self._scope_fields(draft, agent, who)
        if draft.scope == "org":
            # Covers everyone's calls: the creator must be able to approve anyone's.
            why_not = may_cover(agent, who.user_id, None)
            if why_not is None and agent.confirmation_approver_scope == "initiator":
                why_not = "an org-wide rule needs an agent decided by its owner or org members"
        else:
            why_not = may_cover(agent, who.user_id, user_id)
        if why_not is None:
            # As their record says now (membership, enabled), like any decision of theirs.
            why_not = await authority.grant_refusal(self.db, who.user_id, authority.Seat(
                agent.org_id, "org_members", None, None,
                approver_groups=agent.approver_groups))
        if why_not is not None:
            raise RuleRefused(f"'{who.user_id}' may not create this rule: {why_not}")
        return StandingRule(
            id="ar_" + uuid.uuid4().hex[:20], org_id=agent.org_id, agent_id=agent.id,
            tool_name=draft.tool_name, scope=draft.scope, run_id=run_id, user_id=user_id,
            when=draft.when, created_by=who.user_id, created_at=utcnow(),
            expires_at=expires_at, from_request_id=draft.from_request_id, revoked_at=None,
            revoked_by=None, uses=0, last_used_at=None, mode=mode,
        )

    async def _scope_fields(self, draft: RuleDraft, agent: Agent, who: Approver
                            ) -> tuple[str | None, str | None]:
        if draft.scope == "run":
            if not draft.run_id:
                raise RuleInvalid("a rule of scope 'run' needs run_id")
            if draft.from_request_id is not None:
                # From a decision: the request itself says whose run it is.
                return draft.run_id, draft.user_id
            run = await self.table.run_owner(draft.run_id)
            if run is None or run.org_id != who.org_id or run.agent_id != agent.id:
                raise RuleInvalid(f"no run '{draft.run_id}' of agent '{agent.id}' in your org")
            return draft.run_id, run.user_id
        if draft.run_id is not None:
            raise RuleInvalid(f"run_id is only for scope 'run', not {draft.scope!r}")
        if draft.scope == "agent_user":
            if not draft.user_id:
                raise RuleInvalid("a rule of scope 'agent_user' needs user_id (whose calls)")
            return None, draft.user_id
        if draft.user_id is not None:
            raise RuleInvalid("user_id is only for scope 'agent_user' or 'run'")
        return None, None

    async def get(self, rule_id: str, org_id: str | None) -> StandingRule:
        rule = await self.table.get(rule_id)
        if rule is None or rule.org_id != org_id:
            raise RuleNotFound(f"no standing rule '{rule_id}'")
        return rule

    async def list_for_org(self, org_id: str | None, *, active_only: bool = False
                           ) -> list[StandingRule]:
        return await self.table.of_org(org_id, active_only=active_only)

    async def revoke(self, rule_id: str, who: Approver, agent: Agent | None) -> StandingRule:
        """Revoke a rule: its creator, an admin, or anyone who could have created it."""
        rule = await self.get(rule_id, who.org_id)
        if not (who.admin or who.user_id == rule.created_by or (
                agent is not None and may_cover(agent, who.user_id, rule.user_id) is None)):
            raise RuleRefused(f"'{who.user_id}' may not revoke rule {rule_id} (created by "
                              f"{rule.created_by})")
        await self.table.revoke(rule_id, who.user_id)
        return await self.get(rule_id, who.org_id)

    async def set_mode(self, rule_id: str, mode: object, who: Approver) -> StandingRule:
        """Switch a rule between ``shadow`` and ``enforce`` (its creator or an admin): the
        next call it covers reads the new mode, no restart. A revoked rule stays revoked."""
        wanted = parse_mode(mode)
        rule = await self.get(rule_id, who.org_id)
        if not (who.admin or who.user_id == rule.created_by):
            raise RuleRefused(f"'{who.user_id}' may not switch rule {rule_id} (created by "
                              f"{rule.created_by}; its creator or an admin may)")
        if not await self.table.set_mode(rule_id, wanted):
            raise RuleRefused(f"rule {rule_id} was revoked; a revoked rule stays revoked")
        return await self.get(rule_id, who.org_id)

    async def enable(self, rule_id: str, who: Approver) -> StandingRule:
        """Lift a suspension (an admin only): the rule matches again, its creator still
        checked at every use."""
        rule = await self.get(rule_id, who.org_id)
        if not who.admin:
            raise RuleRefused(f"only an admin may enable rule {rule_id} again (it is "
                              f"suspended: {rule.suspended_reason})")
        if rule.revoked_at is not None:
            raise RuleRefused(f"rule {rule_id} was revoked; a revoked rule stays revoked")
        await self.table.lift_suspension(rule_id)
        return await self.get(rule_id, who.org_id)

    async def match(self, ask: ApprovalAsk) -> StandingRule | None:
        """The first active rule that approves ``ask``'s exact call, its use counted; None
        means a person must be asked. The rules in shadow mode that would have approved it
        are recorded (``ask.on_shadow``) and kept in ``ask.shadow`` (the request stores them:
        `stored_shadow`)."""
        agent = ask.agent
        org_id = ask.org_id if ask.org_id is not None else agent.org_id
        rules = await self.table.unrevoked_for(org_id, agent.id, ask.tool_name)
        if not rules:
            return None
        need = authority.requirement_for(ask)
        if need.approvals_required > 1 or not _finite(ask.args):
            # One person's rule never stands in for several people's approvals; and a
            # constraint is not judged over numbers that are no numbers.
            return None
        seat = authority.Seat.of_agent(agent, org_id, ask.user_id, need)
        used: StandingRule | None = None
        shadow: list[ShadowDecision] = []
        for rule in rules:
            # Every rule in shadow mode is judged on every call, also one an enforcing rule
            # approves; any mode but ``enforce`` never decides.
            enforcing = rule.mode == "enforce"
            if (enforcing and used is not None) or not self._covers(rule, ask):
                continue
            # The rule's creator is authorised again now, as a live decision would be.
            if await authority.grant_refusal(self.db, rule.created_by, seat,
                                             rule.suspended_reason or (
                                                 "suspended" if rule.suspended_at else None)
                                             ) is not None:
                continue
            if not enforcing:
                shadow.append(ShadowDecision(f"standing rule {rule.id}", "allow",
                                             f"created by {rule.created_by}"))
                continue
            used = await self._use(rule.id)
        ask.shadow.extend(shadow)
        if shadow and ask.on_shadow is not None:
            ask.on_shadow(shadow, True)
        return used

    def _covers(self, rule: StandingRule, ask: ApprovalAsk) -> bool:
        """Whether the rule's scope and ``when`` cover ``ask`` (who made it: `match`)."""
        if rule.scope == "run" and rule.run_id != ask.run_id:
            return False
        if rule.scope == "agent_user" and (ask.user_id is None or rule.user_id != ask.user_id):
            return False
        if rule.scope not in RULE_SCOPES:
            return False
        if rule.when is None:
            return True
        try:
            condition = parse_when(rule.when)
            assert condition is not None
            ctx = ask.condition_context()
            # Only a plain True counts: a constraint that evaluates to a string or a number
            # is a mistake, not a yes.
            return condition.holds_exactly(ctx)
        except Exception as exc:
            # Fail closed: a constraint that cannot be judged (an error, or a value or cost
            # past the expression limits) asks a person, and the trace says why.
            if ask.emit is not None:
                ask.emit("standing_rule_skipped", {
                    "rule_id": rule.id, "tool_call_id": ask.tool_call_id,
                    "tool_name": ask.tool_name,
                    "reason": f"its 'when' could not be evaluated ({type(exc).__name__}: "
                              f"{exc}); a person is asked"})
            return False

    async def _use(self, rule_id: str) -> StandingRule | None:
        # Counted with a condition, so a rule revoked or expired a moment ago is not used.
        return await self.table.use(rule_id)
