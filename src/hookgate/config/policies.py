"""The configuration's Cedar policies: an org's ``policies:`` entry becomes a
``cedar_policy`` hook on each of its agents, paths are read from the file's folder, and
every policy set in use is loaded and validated when the file loads (file, line, policy id).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hookgate.tools.tool import Tool

if TYPE_CHECKING:
    from hookgate.config.schema import HookgateConfig

HOOK = "cedar_policy"


@dataclass(frozen=True, slots=True)
class PolicySetUse:
    """One policy set the configuration uses (see policy_sets_in_use)."""

    key: str
    path: str
    default: str
    tools: list[Tool]
    declared_tools: bool


class _OrgPolicies(Protocol):
    @property
    def path(self) -> str: ...
    @property
    def default(self) -> str: ...
    @property
    def mode(self) -> str: ...


def with_org_policies(model_config_json: dict[str, Any], entries: Iterable[_OrgPolicies]
                      ) -> dict[str, Any]:
    """The agent's declaration with its org's policy set added as a ``cedar_policy`` hook."""
    for entry in entries:
        hooks = model_config_json.setdefault("hooks", {})
        if not isinstance(hooks, dict):
            continue
        listed = hooks.setdefault("class_hooks", [])
        if isinstance(listed, list):
            listed.append({"name": HOOK, "params": {"policies": entry.path,
                                                    "default": entry.default},
                           **({"mode": entry.mode} if entry.mode != "enforce" else {})})
    return model_config_json


def _declared(config: HookgateConfig) -> Iterable[tuple[str, dict[str, Any], str | None]]:
    """(key, params, agent id) of every ``cedar_policy`` hook entry an agent declares."""
    for i, agent in enumerate(config.agents):
        hooks = agent.model_config_json.get("hooks")
        entries = hooks.get("class_hooks") if isinstance(hooks, Mapping) else None
        for k, entry in enumerate(entries if isinstance(entries, list) else ()):
            if (isinstance(entry, dict) and entry.get("name") == HOOK
                    and isinstance(entry.get("params"), dict)):
                yield (f"agents[{i}].model_config_json.hooks.class_hooks[{k}].params",
                       entry["params"], agent.id)


def anchor_policy_paths(config: HookgateConfig, directory: Path) -> None:
    """Relative policy paths mean the configuration file's folder."""
    for org_entry in config.policies:
        org_entry.path = str(directory / Path(org_entry.path).expanduser())
    for _, params, _ in _declared(config):
        if isinstance(params.get("policies"), str):
            params["policies"] = str(directory / Path(params["policies"]).expanduser())


def policy_sets_in_use(config: HookgateConfig
                       ) -> tuple[list[tuple[str, str]], list[PolicySetUse]]:
    """The problems of the ``policies:`` entries, and every policy set the file uses: its
    key, path, default, the tools of the agents using it, and whether one of them has no
    tools of its own (an external agent, whose runtime declares its tools with each call)."""
    problems: list[tuple[str, str]] = []
    uses: dict[tuple[str, str], tuple[str, set[str]]] = {}
    seen_orgs: dict[str, int] = {}
    for i, entry in enumerate(config.policies):
        key = f"policies[{i}]"
        if config.org(entry.org) is None:
            problems.append((f"{key}.org", f"unknown org '{entry.org}'"))
        if entry.org in seen_orgs:
            problems.append((key, f"org '{entry.org}' already has policies at "
                                  f"policies[{seen_orgs[entry.org]}] (one set per org)"))
        seen_orgs.setdefault(entry.org, i)
        agents = {a.id for a in config.agents if a.org == entry.org}
        uses.setdefault((entry.path, entry.default), (key, set()))[1].update(agents)
    for key, params, agent_id in _declared(config):
        agent = next(a for a in config.agents if a.id == agent_id)
        if agent.org in seen_orgs:
            problems.append((key, f"agent '{agent_id}' declares cedar_policy and its org "
                                  f"'{agent.org}' has policies: too; keep one"))
        path, default = params.get("policies"), params.get("default")
        if isinstance(path, str) and isinstance(default, str):
            uses.setdefault((path, default), (key, set()))[1].add(str(agent_id))
    tools = config.tool_objects
    sets = []
    for (path, default), (key, agent_ids) in uses.items():
        using = [a for a in config.agents if a.id in agent_ids]
        wanted = {name for a in using for name in a.tools}
        sets.append(PolicySetUse(key, path, default, [tools[n] for n in sorted(wanted)
                                                      if n in tools],
                                 any(not a.tools for a in using)))
    return problems, sets


#: False while a command that reports on the policy files itself (``hookgate policy
#: reload|status``) loads the configuration: the files are not loaded with it.
_LOAD_SETS: ContextVar[bool] = ContextVar("load_policy_sets", default=True)


@contextmanager
def policy_sets_left_unloaded() -> Iterator[None]:
    """Load a configuration without loading its policy sets (their problems are the
    caller's to report)."""
    token = _LOAD_SETS.set(False)
    try:
        yield
    finally:
        _LOAD_SETS.reset(token)


def check_policies(config: HookgateConfig) -> list[tuple[str, str]]:
    """Load every policy set the file uses, validated for the tools of every agent that
    uses it; the problems as (key, problem)."""
    problems, sets = policy_sets_in_use(config)
    if not sets or not _LOAD_SETS.get():
        return problems
    try:
        from hookgate.policies import PolicyLoadError, open_policy_set
    except ImportError as exc:
        return [*problems, *((use.key, str(exc)) for use in sets)]

    for use in sets:
        try:
            open_policy_set(Path(use.path), use.default,  # type: ignore[arg-type]
                            use.tools, declared_tools=use.declared_tools)
        except PolicyLoadError as exc:
            problems.append((use.key, "the policies do not load:\n  " +
                             "\n  ".join(exc.problems)))
    return problems
