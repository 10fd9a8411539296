"""One decision of a policy set about one call: allow, deny or ask, with the policies that
decided it, their reasons and the policy set's version (for the trace, audit row and card).

Fail closed: a value Cedar cannot hold, an evaluation error (a missing attribute, a type the
schema does not allow) or a tool the schema lacks denies the call, saying why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import cedarpy

from hookgate.policies.errors import PolicyEvaluationError
from hookgate.policies.facts import CallFacts
from hookgate.policies.policy_set import LoadedPolicies

Effect = Literal["allow", "deny", "ask"]


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """What the policies say about a call, and why."""

    effect: Effect
    policy_ids: tuple[str, ...]
    reasons: tuple[str, ...]
    version: str
    errors: tuple[str, ...] = ()
    #: Each ``@mode("shadow")`` policy's id and what the set would decide with it enforced.
    shadow: tuple[tuple[str, PolicyDecision], ...] = ()

    def explanation(self) -> str:
        """``deny by no-writes-read-only (org is read-only) [policy set cedar-1a2b…]``."""
        by = f" by {', '.join(self.policy_ids)}" if self.policy_ids else ""
        why = "; ".join(self.reasons + self.errors)
        return f"{self.effect}{by}" + (f" ({why})" if why else "") + \
            f" [policy set {self.version}]"


def decide(loaded: LoadedPolicies, facts: CallFacts) -> PolicyDecision:
    """Evaluate ``facts`` against ``loaded`` with the Cedar engine; with each shadow
    policy's decision beside it (never changing it)."""
    decision = _decide(loaded, loaded.policy_set, facts)
    if not loaded.shadow_sets:
        return decision
    if decision.errors:  # not evaluated: the same for every policy
        return unevaluated(loaded, decision)
    return replace(decision, shadow=tuple((i, _decide(loaded, policy_set, facts))
                                          for i, policy_set in loaded.shadow_sets))


def unevaluated(loaded: LoadedPolicies, decision: PolicyDecision) -> PolicyDecision:
    """A decision made before the set could be evaluated (a call it cannot judge): each
    shadow policy would have given it too, and says so."""
    return replace(decision, shadow=tuple((i, decision) for i, _ in loaded.shadow_sets))


def _decide(loaded: LoadedPolicies, policy_set: cedarpy.PolicySet, facts: CallFacts
            ) -> PolicyDecision:
    args_type = loaded.args_type(facts.tool_name)
    if args_type is None:
        return _deny_error(loaded, f"tool '{facts.tool_name}' is not in the policy schema, "
                                   "so no policy can be shown to allow it")
    try:
        request = facts.request(args_type)
    except PolicyEvaluationError as exc:
        return _deny_error(loaded, str(exc))
    result = cedarpy.is_authorized(request, policy_set, facts.entities(),
                                   schema=loaded.schema)
    diagnostics = result.diagnostics
    if diagnostics.errors:
        return _deny_error(loaded, *diagnostics.errors)
    ids = tuple(sorted(diagnostics.reasons))
    infos = [loaded.policies[i] for i in ids if i in loaded.policies]
    if result.decision == cedarpy.Decision.Allow:
        asks = [i for i in infos if i.ask is not None]
        if asks:
            return PolicyDecision("ask", tuple(i.id for i in asks),
                                  tuple(str(i.ask) for i in asks), loaded.version)
        return PolicyDecision("allow", ids, (), loaded.version)
    if ids:  # forbids decided
        return PolicyDecision("deny", ids, tuple(i.reason or f"forbidden by {i.id}"
                                                 for i in infos), loaded.version)
    if loaded.default == "allow":
        return PolicyDecision("allow", (), ("no policy applies; the default is allow",),
                              loaded.version)
    return PolicyDecision("deny", (), (f"no policy permits '{facts.tool_name}' here; the "
                                       "default is deny",), loaded.version)


def _deny_error(loaded: LoadedPolicies, *errors: str) -> PolicyDecision:
    return PolicyDecision("deny", (), ("the policies could not be evaluated",),
                          loaded.version, tuple(errors))
