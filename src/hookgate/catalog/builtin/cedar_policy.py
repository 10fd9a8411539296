"""`cedar_policy`: every call judged by a Cedar policy set (hookgate.policies).

``permit`` allows, ``forbid`` denies with the policy's ``@reason``, a permit with
``@ask("...")`` sends the call to the approval gate with that reason for the approver, and
a call no policy permits gets the declared default (``deny`` or ``allow``, no implicit one).
The decision's policies, reasons and policy-set version go to the trace, the audit row and
the approval card. It fails closed: an evaluation error or a fact it cannot read denies.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
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
from hookgate.policies.decision import unevaluated
from hookgate.policies.facts import LIMITS_KEY
from hookgate.policies.shadow import ShadowDecision, record_shadow
from hookgate.provenance import provenance_of
from hookgate.storage.database import Database
from hookgate.storage.orgs import org_read_only
from hookgate.storage.users import user_admin
from hookgate.tools.arguments import check_arguments
from hookgate.tools.errors import ToolArgumentsError
from hookgate.tools.guarded_call import converted_arguments
from hookgate.tools.tool import Tool

NAME = "cedar_policy"
#: Early, beside readonly_guard: a call the policies refuse need not wait for anything else.
CEDAR_PRIORITY = 20
_PARAMS = ("policies", "default")
#: Where a call's declared JSON schema travels in the hook metadata (hookgate.external
#: puts it there: external/policy.py TOOL_SCHEMA_KEY, a layer above this one).
TOOL_SCHEMA_KEY = "tool_schema"


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


def policy_params(agent: Agent) -> dict[str, Any] | None:
    """The ``cedar_policy`` entry's params among the agent's hooks (its org's ``policies:``
    entry becomes one), None without one."""
    for entry in hook_declaration(agent).get("class_hooks") or ():
        if isinstance(entry, Mapping) and entry.get("name") == NAME:
            params = entry.get("params")
            return dict(params) if isinstance(params, Mapping) else {}
    return None


def _declared_only(**_: Any) -> None:
    raise RuntimeError("a tool declared with a call runs in the agent that declared it")


def declared_tool(name: str, metadata: Mapping[str, Any]) -> Tool | None:
    """The tool a call's runtime declared (its JSON schema in the hook metadata, where
    hookgate.external puts it: external/policy.py TOOL_SCHEMA_KEY); None without one."""
    schema = metadata.get(TOOL_SCHEMA_KEY)
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return None
    return Tool(name=name, description=str(metadata.get("tool_description") or ""),
                parameters=dict(schema), _fn=_declared_only)


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
        self.tools = {t.name: t for t in agent.tools}
        self._provenance_checked: tuple[str | None, bool] = (None, False)

    @classmethod
    def from_declaration(cls, params: dict[str, Any], env: Any) -> CedarPolicy:
        db = require_database(NAME, env, "the callers' admin flags and orgs' read-only flags")
        return cls.opened(params, env.agent, partial(read_principal, db))

    @classmethod
    def opened(cls, params: Mapping[str, Any], agent: Agent, principal: PrincipalReader
               ) -> CedarPolicy:
        """The hook for ``agent`` with the declared params (HookBuildError when they are
        wrong or the policies do not load); ``principal`` reads the caller's facts."""
        reject_unknown_params(NAME, dict(params), _PARAMS)
        path, default = params.get("policies"), params.get("default")
        if not isinstance(path, str) or not path:
            raise HookBuildError("'policies' must be the path of a .cedar file or a folder")
        if default not in DEFAULTS:
            raise HookBuildError(f"'default' must be 'deny' or 'allow' (what happens to a "
                                 f"call no policy permits), got {default!r}")
        try:
            # An agent without tools of its own takes calls of tools its runtime declares.
            live = open_policy_set(Path(path), default, agent.tools,
                                   declared_tools=not agent.tools)
        except PolicyLoadError as exc:
            raise HookBuildError(f"policies {path}: {exc}") from exc
        return cls(live, principal, agent)

    async def decision(self, ctx: HookContext, now: datetime | None = None) -> PolicyDecision:
        """What the policies say about the call in ``ctx``: the one place a call's facts
        are built (``hookgate policy test`` asks here too). The arguments are validated and
        converted by the tool's declared parameter types (an agent's own tool, else the one
        the call declares); a call that cannot be judged is denied, saying why."""
        meta = ctx.metadata
        user, org = ctx.user_id, meta.get("org_id")
        if not user or not org:
            return self._deny(f"the call has no {'user' if not user else 'org'}, and the "
                              "policies decide about users in orgs")
        try:
            principal = await self.principal(user, str(org))
        except LookupError as exc:
            return self._deny(str(exc.args[0] if exc.args else exc))
        name = str(ctx.tool_name)
        own = self.tools.get(name)
        tool = own if own is not None else declared_tool(name, meta)
        if tool is None:
            return self._deny(f"tool '{name}' is not one of agent '{self.agent.id}''s tools "
                              "and its call declares no parameters: an undeclared tool is "
                              "denied")
        try:
            # As every path admits a call's arguments (tools/arguments.py), then converts.
            check_arguments(ctx.tool_args)
            args = converted_arguments(tool, ctx.tool_args)
        except ToolArgumentsError as exc:
            return self._deny(f"invalid arguments for '{name}': "
                              f"{str(exc).removeprefix(f'invalid arguments for {name!r}: ')}")
        depth = meta.get("depth")
        facts = CallFacts(
            tool_name=name, args=args, user_id=user, org_id=str(org),
            agent_id=str(ctx.agent_id or self.agent.id), admin=principal.admin,
            org_read_only=principal.org_read_only, agent_org_id=self.agent.org_id,
            agent_owner=self.agent.owner_user_id, agent_audited=self.audited,
            connector=meta.get("connector") or None, writes=bool(meta.get("writes")),
            requires_confirmation=bool(meta.get("requires_confirmation")),
            execution_path=str(meta.get("execution_path") or "react"),
            depth=depth if isinstance(depth, int) and not isinstance(depth, bool) else 0,
            untrusted_args=_untrusted_args(await provenance_of(ctx)
                                           if self._reads_provenance() else None),
            limits=_limits(meta.get(LIMITS_KEY)),
            **({"now": now} if now is not None else {}))
        return self.policies.decide(facts, None if own is not None else tool)

    async def execute(self, ctx: HookContext) -> HookResult:
        decision = await self.decision(ctx)
        explained = f"policy {decision.explanation()}"
        ctx.policy_decision = explained
        # The @mode("shadow") policies' decisions, recorded beside it (never deciding).
        noted = [explained, *record_shadow(ctx, (
            ShadowDecision(f"policy {i}", d.effect, d.explanation())
            for i, d in decision.shadow))]
        if decision.effect == "deny":
            return HookResult(allow=False, error=f"Blocked by policy: {explained}",
                              side_effects=noted)
        if decision.effect == "ask":
            # The approval gate takes any call with this flag to a person, with these words.
            ctx.ask_for_confirmation(NAME, _ask(decision))
        return HookResult(side_effects=noted)

    def _reads_provenance(self) -> bool:
        """Whether the loaded policies read ``context.untrusted``/``untrusted_args`` (then
        the call's provenance is traced for them; else the session's facts are not read)."""
        loaded = self.policies.loaded
        if self._provenance_checked[0] != loaded.version:
            self._provenance_checked = (loaded.version, "untrusted" in json.dumps(loaded.ests))
        return self._provenance_checked[1]

    def _deny(self, why: str) -> PolicyDecision:
        loaded = self.policies.loaded
        return unevaluated(loaded, PolicyDecision("deny", (), (why,), loaded.version))


def _ask(decision: PolicyDecision) -> str:
    return (f"{'; '.join(decision.reasons)} (policy {', '.join(decision.policy_ids)}, "
            f"policy set {decision.version})")


def _untrusted_args(provenance: Any) -> tuple[str, ...]:
    """``context.untrusted_args``: the call's provenance (hookgate.provenance) as traced."""
    names = provenance.get("untrusted_args") if isinstance(provenance, Mapping) else None
    return tuple(str(n) for n in names) if isinstance(names, list) else ()


def _limits(found: Any) -> Mapping[str, Any]:
    """``context.limits``: what the ``session_limits`` hook's claim found (none: empty)."""
    return found if isinstance(found, Mapping) else {}
