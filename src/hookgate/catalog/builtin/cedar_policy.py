"""`cedar_policy`: every call judged by a Cedar policy set (hookgate.policies).

``permit`` allows, ``forbid`` denies with the policy's ``@reason``, a permit with
``@ask("...")`` sends the call to the approval gate with that reason for the approver, and
a call no policy permits gets the declared default (``deny`` or ``allow``, no implicit one).
The decision's policies, reasons and policy-set version go to the trace, the audit row and
the approval card. It fails closed: an evaluation error or a fact it cannot read denies.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from hookgate.agent import Agent, hook_declaration
from hookgate.catalog.builtin.params import reject_unknown_params, require_database
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext, HookResult, PreToolUseHook
from hookgate.policies import (
    DEFAULTS,
    CallFacts,
    LivePolicySet,
    PolicyDecision,
    PolicyLoadError,
    open_policy_set,
)
from hookgate.storage.database import Database
from hookgate.storage.orgs import org_read_only
from hookgate.storage.users import user_admin

NAME = "cedar_policy"
#: Early, beside readonly_guard: a call the policies refuse need not wait for anything else.
CEDAR_PRIORITY = 20
_PARAMS = ("policies", "default")


@dataclass(frozen=True, slots=True)
class Principal:
    """What the database says now about the caller: admin flag and the org's flag."""

    admin: bool
    org_read_only: bool


#: Reads the caller's facts for (user, org); raises LookupError for one it does not know.
PrincipalReader = Callable[[str, str], Awaitable[Principal]]


class UnknownPrincipal(LookupError):
    """The caller or their org is not in the database, so no policy can be shown to apply."""


async def read_principal(db: Database, user_id: str, org_id: str) -> Principal:
    admin = await user_admin(db, user_id)
    if admin is None:
        raise UnknownPrincipal(f"user '{user_id}' is not an active user in the database")
    read_only = await org_read_only(db, org_id)
    if read_only is None:
        raise UnknownPrincipal(f"org '{org_id}' is not in the database")
    return Principal(admin, read_only)


def audits_every_call(agent: Agent) -> bool:
    """True when the agent declares the ``audit_log`` hook (a row for every call)."""
    entries = hook_declaration(agent).get("class_hooks") or []
    names = {e if isinstance(e, str) else e.get("name") if isinstance(e, Mapping) else None
             for e in entries} if isinstance(entries, list) else set()
    return "audit_log" in names


class CedarPolicy(PreToolUseHook):
    """Asks the live policy set about every call; blocks, asks or allows as it says."""

    name = NAME
    priority = CEDAR_PRIORITY
    fail_mode = "closed"
    #: Facts such as the org's read-only flag can change while a person decides.
    recheck_after_approval = True
    matcher = "every call"

    def __init__(self, policies: LivePolicySet, principal: PrincipalReader, agent: Agent,
                 ) -> None:
        self.policies = policies
        self.principal = principal
        self.agent = agent
        self.audited = audits_every_call(agent)

    @classmethod
    def from_declaration(cls, params: dict[str, Any], env: Any) -> CedarPolicy:
        reject_unknown_params(NAME, params, _PARAMS)
        path, default = params.get("policies"), params.get("default")
        if not isinstance(path, str) or not path:
            raise HookBuildError("'policies' must be the path of a .cedar file or a folder")
        if default not in DEFAULTS:
            raise HookBuildError(f"'default' must be 'deny' or 'allow' (what happens to a "
                                 f"call no policy permits), got {default!r}")
        db = require_database(NAME, env, "the callers' admin flags and orgs' read-only flags")
        agent: Agent = env.agent
        try:
            live = open_policy_set(Path(path), default, agent.tools)
        except PolicyLoadError as exc:
            raise HookBuildError(f"policies {path}: {exc}") from exc
        return cls(live, partial(read_principal, db), agent)

    async def execute(self, ctx: HookContext) -> HookResult:
        meta = ctx.metadata
        user, org = ctx.user_id, meta.get("org_id")
        if not user or not org:
            return self._block(ctx, f"the call has no {'user' if not user else 'org'}, and the "
                                    "policies decide about users in orgs")
        try:
            principal = await self.principal(user, str(org))
        except LookupError as exc:
            return self._block(ctx, str(exc))
        facts = CallFacts(
            tool_name=str(ctx.tool_name), args=ctx.tool_args, user_id=user, org_id=str(org),
            agent_id=str(ctx.agent_id or self.agent.id), admin=principal.admin,
            org_read_only=principal.org_read_only, agent_org_id=self.agent.org_id,
            agent_owner=self.agent.owner_user_id, agent_audited=self.audited,
            connector=meta.get("connector"), writes=bool(meta.get("writes")),
            requires_confirmation=bool(meta.get("requires_confirmation")),
            execution_path=str(meta.get("execution_path") or "react"),
            depth=int(meta.get("depth") or 0))
        decision = self.policies.decide(facts)
        explained = f"policy {decision.explanation()}"
        ctx.policy_decision = explained
        if decision.effect == "deny":
            return HookResult(allow=False, error=f"Blocked by policy: {explained}",
                              side_effects=[explained])
        if decision.effect == "ask":
            # The approval gate takes any call with this flag to a person, with these words.
            ctx.ask_for_confirmation(NAME, _ask(decision))
        return HookResult(side_effects=[explained])

    def _block(self, ctx: HookContext, why: str) -> HookResult:
        version = self.policies.loaded.version
        text = f"policy deny ({why}) [policy set {version}]"
        ctx.policy_decision = text
        return HookResult(allow=False, error=f"Blocked by policy: {text}", side_effects=[text])


def _ask(decision: PolicyDecision) -> str:
    return (f"{'; '.join(decision.reasons)} (policy {', '.join(decision.policy_ids)}, "
            f"policy set {decision.version})")
