"""What a policy decides about: one call's facts, and their Cedar request and entities.

Argument values are converted by the type the schema gives them; a value Cedar cannot hold
exactly (a number out of range, NaN, a decimal with more than four places, a type other
than the signature's) raises PolicyEvaluationError, and the call is denied.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from hookgate.policies.errors import PolicyEvaluationError
from hookgate.policies.schema import AGENT, LIMITS, ORG, USER, CedarType

_LONG = 2**63
#: Where the ``session_limits`` hook leaves what its claim found, in a call's request facts.
LIMITS_KEY = "limits"
#: The one ``Limits`` entity of a request: each limit that counted the call is a tag on it.
LIMITS_ID = "this call"
_DECIMAL_MAX = Decimal("922337203685477.5807")


@dataclass(frozen=True, slots=True)
class CallFacts:
    """Who calls which tool through which agent, with what, and when."""

    tool_name: str
    args: Mapping[str, Any]
    user_id: str
    org_id: str
    agent_id: str
    admin: bool = False
    org_read_only: bool = False
    agent_org_id: str | None = None
    agent_owner: str | None = None
    #: True when the agent keeps an audit row of every call (``audit_log`` in its hooks).
    agent_audited: bool = False
    connector: str | None = None
    writes: bool = False
    requires_confirmation: bool = False
    execution_path: str = "react"
    depth: int = 0
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    #: The arguments holding a value that came only from untrusted content (provenance).
    untrusted_args: tuple[str, ...] = ()
    #: What the session limits' claim for this call found (LIMITS_KEY's value).
    limits: Mapping[str, Any] = field(default_factory=dict)

    def request(self, args_type: CedarType) -> dict[str, Any]:
        """The Cedar request: principal, action, resource and context."""
        now = self.now.astimezone(UTC)
        context = {
            "tool": self.tool_name,
            "connector": self.connector or "",
            "writes": self.writes,
            "requires_confirmation": self.requires_confirmation,
            "org_read_only": self.org_read_only,
            "execution_path": self.execution_path,
            "depth": self.depth,
            "now": {"__extn": {"fn": "datetime",
                               "arg": now.strftime("%Y-%m-%dT%H:%M:%S.") +
                                      f"{now.microsecond // 1000:03d}Z"}},
            "hour": now.hour,
            "untrusted": bool(self.untrusted_args),
            "untrusted_args": list(self.untrusted_args),
            "args": cedar_value(dict(self.args), args_type, "args"),
            "limits": limits_context(self.limits),
        }
        return {"principal": {"type": USER, "id": self.user_id},
                "action": {"type": "Action", "id": self.tool_name},
                "resource": {"type": AGENT, "id": self.agent_id},
                "context": context}

    def entities(self) -> list[dict[str, Any]]:
        """The user in their org, the org, and the agent (in its org, when it has one)."""
        orgs = {self.org_id: self.org_read_only}
        agent_parents = []
        if self.agent_org_id:
            orgs.setdefault(self.agent_org_id, False)
            agent_parents.append({"type": ORG, "id": self.agent_org_id})
        return [
            {"uid": {"type": USER, "id": self.user_id},
             "attrs": {"admin": self.admin, "role": "admin" if self.admin else "member"},
             "parents": [{"type": ORG, "id": self.org_id}]},
            {"uid": {"type": AGENT, "id": self.agent_id},
             "attrs": {"audited": self.agent_audited, "owner": self.agent_owner or ""},
             "parents": agent_parents},
            *({"uid": {"type": ORG, "id": org}, "attrs": {"read_only": flag}, "parents": []}
              for org, flag in orgs.items()),
            {"uid": {"type": LIMITS, "id": LIMITS_ID}, "attrs": {}, "parents": [],
             "tags": limits_by_name(self.limits)},
        ]


def limits_context(limits: Mapping[str, Any]) -> dict[str, Any]:
    """``context.limits``: the limits that counted the call (``names``) and, among them, the
    tightest count (``count_used``, ``count_remaining``) and sum (``sum_used``,
    ``sum_remaining``: decimals, given in whole ten-thousandths); each of the last four
    only when such a limit counted the call. ``by_name`` is the request's ``Limits`` entity,
    whose tags are each limit's own figures (``limits_by_name``)."""
    names = limits.get("names")
    out: dict[str, Any] = {"names": [str(n) for n in names]
                           if isinstance(names, list | tuple) else []}
    out.update(_figures(limits, "context.limits"))
    limits_by_name(limits)  # a figure Cedar cannot hold denies the call here, saying which
    out["by_name"] = {"__entity": {"type": LIMITS, "id": LIMITS_ID}}
    return out


def limits_by_name(limits: Mapping[str, Any]) -> dict[str, Any]:
    """The tags of the ``Limits`` entity: for each limit that counted the call, under its
    name, ``count_used`` and, as that limit has them, ``count_remaining``, ``sum_used`` and
    ``sum_remaining`` (this call included)."""
    by_name = limits.get("by_name")
    if not isinstance(by_name, Mapping):
        return {}
    return {str(name): _figures(figures if isinstance(figures, Mapping) else {},
                                f"context.limits.by_name.getTag({str(name)!r})")
            for name, figures in by_name.items()}


def _figures(limits: Mapping[str, Any], path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("count_used", "count_remaining"):
        if key in limits:
            out[key] = cedar_value(limits[key], {"type": "Long"}, f"{path}.{key}")
    for key in ("sum_used", "sum_remaining"):
        if key in limits:  # whole ten-thousandths, as the claims keep them
            units = limits[key]
            if (isinstance(units, bool) or not isinstance(units, int)
                    or not 0 <= units < _LONG):
                raise PolicyEvaluationError(f"{path}.{key} = {units!r:.40} is not a "
                                            "count of ten-thousandths Cedar's decimal holds")
            out[key] = {"__extn": {"fn": "decimal",
                                   "arg": format(Decimal(units).scaleb(-4), "f")}}
    return out


def cedar_value(value: Any, ctype: CedarType, path: str) -> Any:
    """``value`` as Cedar JSON of type ``ctype``; PolicyEvaluationError when it cannot be."""
    kind = ctype.get("type")
    if kind == "Record":
        if not isinstance(value, Mapping):
            raise _mismatch(path, value, "an object")
        out = {}
        for key, attr in ctype["attributes"].items():
            if key in value and value[key] is not None:
                out[key] = cedar_value(value[key], attr, f"{path}.{key}")
        return out
    if kind == "Set":
        if not isinstance(value, list | tuple):
            raise _mismatch(path, value, "a list")
        return [cedar_value(v, ctype["element"], f"{path}[{i}]") for i, v in enumerate(value)]
    if kind == "String":
        if not isinstance(value, str):
            raise _mismatch(path, value, "a string")
        return value
    if kind == "Boolean":
        if not isinstance(value, bool):
            raise _mismatch(path, value, "true or false")
        return value
    if kind == "Long":
        if not isinstance(value, int) or isinstance(value, bool):
            raise _mismatch(path, value, "a whole number")
        if not -_LONG <= value < _LONG:
            raise PolicyEvaluationError(
                f"{path} = {value} is outside the 64-bit range Cedar's Long holds")
        return value
    if ctype.get("name") == "decimal":
        return {"__extn": {"fn": "decimal", "arg": _decimal_text(value, path)}}
    raise PolicyEvaluationError(f"{path}: the schema type {ctype!r} is not one hookgate fills")


def _decimal_text(value: Any, path: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _mismatch(path, value, "a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise PolicyEvaluationError(f"{path} = {value} is not a finite number")
    try:
        exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation as exc:  # pragma: no cover - repr of a finite float parses
        raise PolicyEvaluationError(f"{path} = {value!r} is not a number") from exc
    if abs(exact) > _DECIMAL_MAX:
        raise PolicyEvaluationError(
            f"{path} = {value} is outside the range of Cedar's decimal (±{_DECIMAL_MAX})")
    if exact != exact.quantize(Decimal("0.0001")):
        raise PolicyEvaluationError(
            f"{path} = {value} has more than four decimal places, which Cedar's decimal "
            "cannot hold exactly")
    return format(exact.quantize(Decimal("0.0001")), "f")


def _mismatch(path: str, value: Any, wanted: str) -> PolicyEvaluationError:
    return PolicyEvaluationError(
        f"{path} is {type(value).__name__} {value!r:.80}, but the tool's signature (and so "
        f"the policy schema) says {wanted}")
