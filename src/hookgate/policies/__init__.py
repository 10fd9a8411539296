"""Policy as code: tool-call rules written in Cedar, validated against a schema made from
the tools' signatures, evaluated by the Cedar engine (``cedarpy``) and explained.

The ``cedar_policy`` hook (catalog/builtin/cedar_policy.py) asks `LivePolicySet.decide`.
"""

try:
    import cedarpy  # noqa: F401  (the engine every module here uses)
except ImportError as exc:  # pragma: no cover - the extra is part of the dev install
    raise ImportError("Cedar policies need the Cedar engine's Python bindings: "
                      "pip install 'hookgate[cedar]'") from exc

from hookgate.policies.decision import PolicyDecision
from hookgate.policies.errors import PolicyLoadError
from hookgate.policies.facts import CallFacts
from hookgate.policies.live import LivePolicySet, open_policy_set
from hookgate.policies.policy_set import DEFAULTS, LoadedPolicies, load_policies
from hookgate.policies.schema import cedar_schema, cedar_schema_text

__all__ = [
    "DEFAULTS",
    "CallFacts",
    "LivePolicySet",
    "LoadedPolicies",
    "PolicyDecision",
    "PolicyLoadError",
    "cedar_schema",
    "cedar_schema_text",
    "load_policies",
    "open_policy_set",
]
