"""Does each configured agent build? Its model, its hook registry and, for a Claude Code
agent, its policy: the one check `hookgate check` prints and `hookgate serve` refuses to
start without (or, with ``--allow-broken-agents``, names in its log and ``GET /api/agents``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hookgate.config.errors import ConfigError
from hookgate.hooks.errors import HookBuildError

if TYPE_CHECKING:
    from hookgate.config.schema import HookgateConfig
    from hookgate.hooks.registry import HookRegistry
    from hookgate.hooks.services import HookServices


@dataclass(frozen=True)
class BrokenAgent:
    """An agent whose runs would all end ``blocked_build``, and why."""

    agent_id: str
    #: Where in the file: ``agents[0] ('buyer')``.
    at: str
    #: What failed, naming the entry: ``model_config_json.hooks.class_hooks[1] 'x': …``.
    problem: str

    def __str__(self) -> str:
        return f"{self.at}: {self.problem}"


@dataclass(frozen=True)
class AgentCheck:
    """Each agent's hook registry (those that built) and each agent that did not."""

    registries: dict[str, HookRegistry]
    broken: list[BrokenAgent]


def check_agents(cfg: HookgateConfig, services: HookServices) -> AgentCheck:
    """Build every agent as a run would; nothing runs and nothing is written."""
    # Imported here: the catalog and the Claude Code policy import the configuration.
    from hookgate.catalog import build_registry
    from hookgate.external.calls import SECTION as GUARDED_CALLS
    from hookgate.external.coding.policy import CodingAgentPolicy, declares_coding_rules
    from hookgate.external.policy import CallRules

    registries: dict[str, HookRegistry] = {}
    broken: list[BrokenAgent] = []
    for index, spec in enumerate(cfg.agents):
        at = f"agents[{index}] ('{spec.id}')"
        try:
            cfg.model_for(spec.id)
        except ConfigError as exc:
            broken.append(BrokenAgent(spec.id, at, f"model '{spec.model}': {exc.problem}"))
            continue
        try:
            built = cfg.build_agent(spec.id)
            registry = build_registry(built, services)
            if declares_coding_rules(built.model_config_json):
                CodingAgentPolicy.of(built)
            if GUARDED_CALLS in (built.model_config_json or {}):
                CallRules.read(built, GUARDED_CALLS, default_wait_s=0.0)
        except HookBuildError as exc:
            # "agent 'x': hooks.…" — the agent is named already, and hooks sit in
            # model_config_json in the file.
            detail = str(exc).removeprefix(f"agent '{spec.id}': ")
            if detail.startswith("hooks."):
                detail = f"model_config_json.{detail}"
            broken.append(BrokenAgent(spec.id, at, detail))
            continue
        registries[spec.id] = registry
    return AgentCheck(registries, broken)
