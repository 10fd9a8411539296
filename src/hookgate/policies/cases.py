"""A table of policy test cases (``hookgate policy test FILE``): who calls which tool with
what, and the decision expected — read from YAML, each checked against the policy set."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hookgate.policies.decision import PolicyDecision
from hookgate.policies.errors import PolicyLoadError

EFFECTS = ("allow", "deny", "ask")
_KEYS = {"name", "user", "agent", "tool", "args", "expect", "org_read_only", "now",
         "parameters", "execution_path"}


@dataclass(frozen=True, slots=True)
class PolicyCase:
    """One row: the call, and the effect the policies should give it."""

    name: str
    user: str
    tool: str
    expect: str
    args: dict[str, Any] = field(default_factory=dict)
    agent: str | None = None
    #: Overrides the org's configured read-only flag for this case.
    org_read_only: bool | None = None
    #: An ISO 8601 time for the call (default: now).
    now: str | None = None
    #: The JSON schema of a tool the agent's runtime declares with the call (an external
    #: agent's tool), as ``parameters`` of ``POST /api/v1/calls``.
    parameters: dict[str, Any] | None = None
    #: The path the call comes by (default: ``external`` with ``parameters``, else ``react``).
    execution_path: str | None = None


@dataclass(frozen=True, slots=True)
class CaseResult:
    case: PolicyCase
    decision: PolicyDecision

    @property
    def passed(self) -> bool:
        return self.decision.effect == self.case.expect


def read_cases(path: Path) -> list[PolicyCase]:
    """The cases of a YAML file ``{cases: [...]}``; PolicyLoadError naming a bad row."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise PolicyLoadError([f"{path}: cannot be read: {exc}"]) from exc
    rows = raw.get("cases") if isinstance(raw, Mapping) else None
    if not isinstance(rows, list) or not rows:
        raise PolicyLoadError([f"{path}: expected a mapping with a non-empty 'cases' list"])
    cases, problems = [], []
    for i, row in enumerate(rows):
        at = f"{path}: cases[{i}]"
        if not isinstance(row, Mapping):
            problems.append(f"{at}: must be a mapping")
            continue
        unknown = set(row) - _KEYS
        missing = {"user", "tool", "expect"} - set(row)
        if unknown or missing:
            problems.append(f"{at}: " + "; ".join(
                [*(f"unknown key '{k}'" for k in sorted(map(str, unknown))),
                 *(f"missing '{k}'" for k in sorted(missing))]))
            continue
        if row["expect"] not in EFFECTS:
            problems.append(f"{at}: expect must be one of {', '.join(EFFECTS)}")
            continue
        args = row.get("args") or {}
        if not isinstance(args, Mapping):
            problems.append(f"{at}: args must be a mapping")
            continue
        parameters = row.get("parameters")
        if parameters is not None and not (isinstance(parameters, Mapping)
                                           and parameters.get("type") == "object"):
            problems.append(f"{at}: parameters must be a JSON schema of type object")
            continue
        cases.append(PolicyCase(
            name=str(row.get("name") or f"case {i}"), user=str(row["user"]),
            tool=str(row["tool"]), expect=str(row["expect"]), args=dict(args),
            agent=None if row.get("agent") is None else str(row["agent"]),
            org_read_only=row.get("org_read_only"),
            now=None if row.get("now") is None else str(row["now"]),
            parameters=None if parameters is None else dict(parameters),
            execution_path=None if row.get("execution_path") is None
            else str(row["execution_path"])))
    if problems:
        raise PolicyLoadError(problems)
    return cases
