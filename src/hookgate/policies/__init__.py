"""Policy as code: tool-call rules written in Cedar, validated against a schema made from
the tools' signatures, evaluated by the Cedar engine (``cedarpy``) and explained.

The ``cedar_policy`` hook (catalog/builtin/cedar_policy.py) asks `LivePolicySet.decide`.
Shadow mode (policies/shadow.py) needs no Cedar engine, so the names below load on first
use, and only they need the ``cedar`` extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hookgate.policies.decision import PolicyDecision
    from hookgate.policies.errors import PolicyLoadError
    from hookgate.policies.facts import CallFacts
    from hookgate.policies.live import LivePolicySet, open_policy_set
    from hookgate.policies.policy_set import DEFAULTS, LoadedPolicies, load_policies
    from hookgate.policies.schema import cedar_schema, cedar_schema_text

_WHERE = {
    "DEFAULTS": "policy_set", "CallFacts": "facts", "LivePolicySet": "live",
    "LoadedPolicies": "policy_set", "PolicyDecision": "decision",
    "PolicyLoadError": "errors", "cedar_schema": "schema", "cedar_schema_text": "schema",
    "load_policies": "policy_set", "open_policy_set": "live",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'hookgate.policies' has no attribute {name!r}")
    try:
        import cedarpy  # noqa: F401  (the engine every module here but shadow uses)
    except ImportError as exc:  # pragma: no cover - the extra is part of the dev install
        raise ImportError("Cedar policies need the Cedar engine's Python bindings: "
                          "pip install 'hookgate[cedar]'") from exc
    return getattr(importlib.import_module(f"hookgate.policies.{module}"), name)


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
