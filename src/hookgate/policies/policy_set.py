"""A loaded policy set: every file parsed and validated against the schema, each policy
named (its ``@id``, else ``file:line``) and located, with its ``@ask`` and ``@reason``.

Annotations hookgate reads: ``@id("...")`` names a policy; ``@reason("...")`` is what a
denial by a ``forbid`` says; ``@ask("...")`` on a ``permit`` sends the calls it permits to
a person, with that reason shown to them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import cedarpy

from hookgate.policies.errors import PolicyLoadError
from hookgate.policies.source import PolicyFile, read_policy_files, version_of

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

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True, slots=True)
class LoadedPolicies:
    """A policy set ready for the engine, and what explains its decisions."""

    version: str
    default: Default
    policy_set: cedarpy.PolicySet
    schema: cedarpy.Schema
    schema_json: dict[str, Any]
    policies: dict[str, PolicyInfo]

    def args_type(self, tool_name: str) -> dict[str, Any] | None:
        """The Cedar type of the tool's arguments; None for a tool the schema lacks."""
        action = self.schema_json[""]["actions"].get(tool_name)
        if action is None or "appliesTo" not in action:
            return None
        found: dict[str, Any] = action["appliesTo"]["context"]["attributes"]["args"]
        return found


def load_policies(path: Path, schema_json: dict[str, Any], default: Default) -> LoadedPolicies:
    """Read, parse and validate the policies at ``path``; PolicyLoadError naming the file,
    the line and the policy for every problem found."""
    if default not in DEFAULTS:
        raise PolicyLoadError([f"default must be 'deny' or 'allow', got {default!r}"])
    files = read_policy_files(path)
    schema_text = json.dumps(schema_json)
    schema = cedarpy.Schema.from_json_str(schema_text)
    problems: list[str] = []
    merged: dict[str, Any] = {}
    infos: dict[str, PolicyInfo] = {}
    for file in files:
        parsed = _parse(file, problems)
        if parsed is None:
            continue
        lines = file.policy_lines()
        located: dict[str, PolicyInfo] = {}
        for index, (positional, est) in enumerate(parsed.items()):
            line = lines[index] if index < len(lines) else 1
            info = _info(file, line, est, problems)
            located[positional] = info
            if info.id in infos:
                problems.append(f"{info.where}: policy id '{info.id}' is already used at "
                                f"{infos[info.id].where}")
                continue
            infos[info.id] = info
            merged[info.id] = est
        result = cedarpy.validate_policies(file.text, schema)
        for error in result.errors:
            found = located.get(error.policy_id)
            at = f"{found.where}: policy '{found.id}'" if found else file.name
            said = error.error.removeprefix(f"for policy `{error.policy_id}`, ")
            problems.append(f"{at}: {said.replace(f'`{error.policy_id}`', 'it')}")
    if problems:
        raise PolicyLoadError(problems)
    policy_set = cedarpy.PolicySet.from_json_str(json.dumps(
        {"staticPolicies": merged, "templates": {}, "templateLinks": []}))
    return LoadedPolicies(version_of(files), default, policy_set, schema, schema_json, infos)


def _parse(file: PolicyFile, problems: list[str]) -> dict[str, Any] | None:
    try:
        parsed = json.loads(cedarpy.policies_to_json_str(file.text))
    except ValueError as exc:
        problems.append(f"{file.name}:{_failing_line(file)}: cannot be parsed: {exc}")
        return None
    if parsed.get("templates"):
        problems.append(f"{file.name}: templates (?principal, ?resource) are not supported; "
                        "write each policy out")
        return None
    policies: dict[str, Any] = parsed.get("staticPolicies", {})
    # Cedar numbers policies by position (policy0, policy1, …); keep that order.
    return dict(sorted(policies.items(), key=lambda kv: int(kv[0].removeprefix("policy"))))


def _failing_line(file: PolicyFile) -> int:
    """The first line of the first policy that does not parse (the engine's error has no
    position): the longest prefix of whole policies that parses ends just before it."""
    lines = file.text.splitlines(keepends=True)
    starts = file.policy_lines()
    for index, start in enumerate(starts):
        end = starts[index + 1] - 1 if index + 1 < len(starts) else len(lines)
        try:
            cedarpy.policies_to_json_str("".join(lines[:end]))
        except ValueError:
            return start
    return starts[-1] if starts else 1


def _info(file: PolicyFile, line: int, est: dict[str, Any], problems: list[str]) -> PolicyInfo:
    notes = est.get("annotations") or {}
    policy_id = notes.get("id") or f"{file.name}:{line}"
    info = PolicyInfo(policy_id, file.name, line, str(est.get("effect")), notes.get("ask"),
                      notes.get("reason"))
    if info.ask is not None and info.effect != "permit":
        problems.append(f"{info.where}: policy '{policy_id}': @ask belongs on a permit (a "
                        "forbid always denies; write the calls a person may allow as a "
                        "permit with @ask)")
    return info
