"""A loaded policy set: every file parsed and validated against the schema, each policy
named (its ``@id``, else ``file:line``) and located, with its ``@ask`` and ``@reason``.

Annotations hookgate reads: ``@id("...")`` names a policy; ``@reason("...")`` is what a
denial by a ``forbid`` says; ``@ask("...")`` on a ``permit`` sends the calls it permits to
a person, with that reason shown to them; ``@mode("shadow")`` puts one policy in shadow
mode (policies/shadow.py): the set decides without it, and what the set would decide with
it is recorded beside the decision (``@mode("enforce")``, the default, enforces it).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import cedarpy

from hookgate.policies.errors import PolicyLoadError
from hookgate.policies.schema import CALL_TOOL, action_entry
from hookgate.policies.shape import shape_problems
from hookgate.policies.source import PolicyFile, read_policy_files, version_of
from hookgate.tools.tool import Tool

#: What happens to a call no policy permits (and none forbids).
Default = Literal["deny", "allow"]
DEFAULTS: tuple[Default, ...] = ("deny", "allow")


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    """One policy: its id, where it is written, and what hookgate reads from it."""

    id: str
    file: str
    line: int
    effect: str
    ask: str | None = None
    reason: str | None = None
    mode: str = "enforce"

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


#: The deepest policy (in its JSON form) the Cedar engine takes back from JSON.
MAX_DEPTH = 120
#: The tools a policy's action scope names; None: every tool (``action``, ``action in
#: Action::"call_tool"``).
Scope = frozenset[str] | None


@dataclass(frozen=True, slots=True)
class LoadedPolicies:
    """A policy set ready for the engine, and what explains its decisions."""

    version: str
    default: Default
    policy_set: cedarpy.PolicySet
    schema: cedarpy.Schema
    schema_json: dict[str, Any]
    policies: dict[str, PolicyInfo]
    #: Each policy's JSON form and action scope (to validate it for a declared tool).
    ests: dict[str, Any] = field(default_factory=dict)
    scopes: dict[str, Scope] = field(default_factory=dict)
    #: Each ``@mode("shadow")`` policy's id and the set that enforces it beside the
    #: enforcing policies (``policy_set``): what the set would decide with it.
    shadow_sets: tuple[tuple[str, cedarpy.PolicySet], ...] = ()

    def args_type(self, tool_name: str) -> dict[str, Any] | None:
        """The Cedar type of the tool's arguments; None for a tool the schema lacks."""
        action = self.schema_json[""]["actions"].get(tool_name)
        if action is None or "appliesTo" not in action:
            return None
        found: dict[str, Any] = action["appliesTo"]["context"]["attributes"]["args"]
        return found

    def with_declared_tool(self, tool: Tool) -> LoadedPolicies:
        """This set for a call of ``tool``, declared by the agent's runtime with the call (an
        external agent's): the schema gains the tool, and every policy that can apply to it
        is validated against that schema; PolicyLoadError naming each problem."""
        schema_json = copy.deepcopy(self.schema_json)
        schema_json[""]["actions"][tool.name] = action_entry(tool)
        try:
            schema = cedarpy.Schema.from_json_str(json.dumps(schema_json))
        except ValueError as exc:
            raise PolicyLoadError([f"tool '{tool.name}': its declared parameters give no "
                                   f"Cedar schema: {_one_line(exc)}"]) from None
        applying = [(i, self.ests[i]) for i, scope in self.scopes.items()
                    if scope is None or tool.name in scope]
        problems = [f"{self.policies[i].where}: policy '{i}': {said} (for the declared tool "
                    f"'{tool.name}')" for i, said in _validate(applying, schema)]
        if problems:
            raise PolicyLoadError(problems)
        return replace(self, schema=schema, schema_json=schema_json)


def load_policies(path: Path, schema_json: dict[str, Any], default: Default, *,
                  declared_tools: bool = False) -> LoadedPolicies:
    """Read, parse and validate the policies at ``path``; PolicyLoadError naming the file,
    the line and the policy for every problem found.

    ``declared_tools``: the set also decides about tools an agent's runtime declares with
    each call, so a policy that names a tool the schema lacks (or, with no tools in the
    schema, any policy) is validated when a call declares the tool, not now."""
    return policies_of(read_policy_files(path), schema_json, default,
                       declared_tools=declared_tools)


def policies_of(files: list[PolicyFile], schema_json: dict[str, Any], default: Default, *,
                declared_tools: bool = False) -> LoadedPolicies:
    """The set of ``files`` (already read), parsed and validated as load_policies says."""
    if default not in DEFAULTS:
        raise PolicyLoadError([f"default must be 'deny' or 'allow', got {default!r}"])
    schema = cedarpy.Schema.from_json_str(json.dumps(schema_json))
    known = frozenset(schema_json[""]["actions"]) - {CALL_TOOL}
    problems: list[str] = []
    merged: dict[str, Any] = {}
    infos: dict[str, PolicyInfo] = {}
    scopes: dict[str, Scope] = {}
    for file in files:
        parsed = _parse(file, problems)
        if parsed is None:
            continue
        lines = file.policy_lines()
        for index, est in enumerate(parsed.values()):
            line = lines[index] if index < len(lines) else 1
            info = _info(file, line, est, problems)
            if info.id in infos:
                problems.append(f"{info.where}: policy id '{info.id}' is already used at "
                                f"{infos[info.id].where}")
                continue
            infos[info.id] = info
            merged[info.id] = est
            scopes[info.id] = _scope(est)
    checked = [(i, est) for i, est in merged.items()
               if not (declared_tools and _deferred(scopes[i], known))]
    for policy_id, said in _validate(checked, schema):
        problems.append(f"{infos[policy_id].where}: policy '{policy_id}': {said}")
    if problems:
        raise PolicyLoadError(problems)
    enforced = {i: est for i, est in merged.items() if infos[i].mode == "enforce"}
    shadow_sets = tuple((i, _policy_set({**enforced, i: est})) for i, est in merged.items()
                        if infos[i].mode == "shadow")
    return LoadedPolicies(version_of(files), default, _policy_set(enforced), schema,
                          schema_json, infos, merged, scopes, shadow_sets)


def _policy_set(policies: dict[str, Any]) -> cedarpy.PolicySet:
    return cedarpy.PolicySet.from_json_str(json.dumps(
        {"staticPolicies": policies, "templates": {}, "templateLinks": []}))


def _scope(est: dict[str, Any]) -> Scope:
    constraint = est.get("action") or {}
    named = ([constraint["entity"]] if "entity" in constraint
             else list(constraint.get("entities") or []))
    ids = frozenset(str(e.get("id")) for e in named if isinstance(e, dict))
    if constraint.get("op") == "All" or (constraint.get("op") == "in" and CALL_TOOL in ids):
        return None
    return ids


def _deferred(scope: Scope, known: frozenset[str]) -> bool:
    """Whether a policy waits for a declared tool to be validated: it names a tool the
    schema lacks, or applies to every tool while the schema has none."""
    return not known if scope is None else not scope <= known


def _validate(policies: list[tuple[str, Any]], schema: cedarpy.Schema) -> list[tuple[str, str]]:
    """(policy id, problem) for each validation error of ``policies`` against ``schema``."""
    if not policies:
        return []
    text = cedarpy.policies_from_json_str(json.dumps(
        {"staticPolicies": dict(policies), "templates": {}, "templateLinks": []}))
    out: list[tuple[int, str, str]] = []
    for error in cedarpy.validate_policies(text, schema).errors:
        position = error.policy_id.removeprefix("policy")
        index = int(position) if position.isdigit() and int(position) < len(policies) else 0
        said = error.error.removeprefix(f"for policy `{error.policy_id}`, ")
        out.append((index, policies[index][0], said.replace(f"`{error.policy_id}`", "it")))
    # The engine reports in no fixed order: by policy, then by text, so that every process
    # says the same.
    return [(policy_id, said) for _, policy_id, said in sorted(out)]


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _parse(file: PolicyFile, problems: list[str]) -> dict[str, Any] | None:
    before = len(problems)
    unsafe = shape_problems(file.name, file.text)
    if unsafe:
        problems.extend(unsafe)
        return None
    try:
        parsed = json.loads(cedarpy.policies_to_json_str(file.text))
    except ValueError as exc:
        problems.append(f"{file.name}:{_failing_line(file)}: cannot be parsed: "
                        f"{_one_line(exc)}")
        return None
    except RecursionError:
        problems.append(f"{file.name}:{_too_deep_line(file)}: the policy starting here nests "
                        f"more than {MAX_DEPTH} levels deep, more than the Cedar engine can "
                        "take; split it into simpler policies")
        return None
    if parsed.get("templates"):
        problems.append(f"{file.name}: templates (?principal, ?resource) are not supported; "
                        "write each policy out")
        return None
    policies: dict[str, Any] = parsed.get("staticPolicies", {})
    # Cedar numbers policies by position (policy0, policy1, …); keep that order.
    ordered = dict(sorted(policies.items(), key=lambda kv: int(kv[0].removeprefix("policy"))))
    lines = file.policy_lines()
    for index, est in enumerate(ordered.values()):
        if _depth(est) > MAX_DEPTH:
            line = lines[index] if index < len(lines) else 1
            problems.append(f"{file.name}:{line}: the policy starting here nests more than "
                            f"{MAX_DEPTH} levels deep (about {MAX_DEPTH // 2} chained "
                            "operators), more than the Cedar engine can take; split it into "
                            "simpler policies")
    return None if len(problems) > before else ordered


def _too_deep_line(file: PolicyFile) -> int:
    """The line of the first policy whose JSON form is too deep for Python to read."""
    lines = file.text.splitlines(keepends=True)
    starts = file.policy_lines()
    for index, start in enumerate(starts):
        end = starts[index + 1] - 1 if index + 1 < len(starts) else len(lines)
        try:
            json.loads(cedarpy.policies_to_json_str("".join(lines[start - 1:end])))
        except RecursionError:
            return start
        except ValueError:
            continue
    return 1


def _depth(value: Any) -> int:
    """How deeply ``value`` (a policy's JSON form) nests, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        children = (item.values() if isinstance(item, dict)
                    else item if isinstance(item, list) else ())
        stack.extend((child, level + 1) for child in children)
    return deepest


def _failing_line(file: PolicyFile) -> int:
    """The first line of the first policy that does not parse (the engine's error has no
    position): the longest prefix of whole policies that parses ends just before it, found
    by bisection (a few parses, however many policies the file holds)."""
    lines = file.text.splitlines(keepends=True)
    starts = file.policy_lines()
    if not starts:
        return 1

    def parses(count: int) -> bool:  # the first ``count`` policies
        end = starts[count] - 1 if count < len(starts) else len(lines)
        try:
            cedarpy.policies_to_json_str("".join(lines[:end]))
        except ValueError:
            return False
        return True

    low, high = 0, len(starts)  # parses(low) holds; the answer is the policy at ``low``
    while low < high:
        middle = (low + high + 1) // 2
        if parses(middle):
            low = middle
        else:
            high = middle - 1
    return starts[min(low, len(starts) - 1)]


def _info(file: PolicyFile, line: int, est: dict[str, Any], problems: list[str]) -> PolicyInfo:
    notes = est.get("annotations") or {}
    policy_id = notes.get("id") or f"{file.name}:{line}"
    mode = notes.get("mode") or "enforce"
    info = PolicyInfo(policy_id, file.name, line, str(est.get("effect")), notes.get("ask"),
                      notes.get("reason"), mode)
    if mode not in ("enforce", "shadow"):
        problems.append(f"{info.where}: policy '{policy_id}': @mode must be \"enforce\" or "
                        f"\"shadow\", got {mode!r}")
    if info.ask is not None and info.effect != "permit":
        problems.append(f"{info.where}: policy '{policy_id}': @ask belongs on a permit (a "
                        "forbid always denies; write the calls a person may allow as a "
                        "permit with @ask)")
    return info
