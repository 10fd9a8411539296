"""Running eval cases with hooks bypassed on purpose: an automated evaluation must not wait
for a person. This is the only place in hookgate that bypasses hooks; the server, the run
manager and the configuration cannot reach it, and every event of an eval run says
``hooks_bypassed: true``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hookgate.agent import Agent
from hookgate.catalog.build import build_registry
from hookgate.engines.driver import Lineage, RunDriver
from hookgate.engines.events import EventSink
from hookgate.engines.react import ReActEngine
from hookgate.engines.result import RunResult
from hookgate.engines.state import RunState
from hookgate.evals.suite import EvalCase, EvalSuite
from hookgate.hooks.registry import HookRegistry
from hookgate.hooks.services import HookServices
from hookgate.llm.base import ChatModel
from hookgate.llm.scripted import ScriptedLLM
from hookgate.tools.calls import ToolCall, ToolOutcome
from hookgate.tools.guarded import execute_tool_call
from hookgate.tools.guarded_call import new_call


class _HooksBypassedDriver(RunDriver):
    def build(self) -> bool:
        # The declaration must still build (fail closed); then no hook of it runs.
        if not super().build():
            return False
        self.registry = HookRegistry()
        self.state.extra["hooks_bypassed"] = True
        return True

    def emit(self, type_: str, data: dict[str, Any]) -> None:
        super().emit(type_, {**data, "hooks_bypassed": True})

    async def guarded_call(self, call: ToolCall, resume_at: str | None, *,
                           reenter: bool = False) -> ToolOutcome:
        assert self.registry is not None
        return await execute_tool_call(new_call(self.identity(), call, self.tools),
                                       registry=self.registry, ledger=self.ledger,
                                       hooks_bypassed=True)


class EvalEngine(ReActEngine):
    """A ReActEngine for evals: the agent's tools run without its hooks (and without the
    approval gate), on ``execution_path="eval"``."""

    name = "eval"

    def _driver(self, agent: Agent, state: RunState, sink: EventSink,
                lineage: Lineage | None) -> RunDriver:
        return _HooksBypassedDriver(
            agent, state, sink, services=self.services, registries=self.registries,
            ledger=self.ledger, store=None,
            resume_resolver=None, lineage=Lineage(execution_path="eval"),
            extra_tools=self.extra_tools)


@dataclass
class CaseResult:
    case: EvalCase
    result: RunResult
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems


def check(case: EvalCase, result: RunResult) -> list[str]:
    """What about the run does not meet the case's expectation (empty: it passed)."""
    problems = []
    if result.status != "completed":
        problems.append(f"the run ended '{result.status}': {result.error or 'no answer'}")
    want = case.expect
    if want.answer_contains is not None and want.answer_contains not in (result.answer or ""):
        problems.append(f"the answer {result.answer!r} does not contain "
                        f"{want.answer_contains!r}")
    if want.tool_calls is not None:
        made = [e for e in result.trace if e["type"] == "tool_call"]
        names = [e["tool_name"] for e in made]
        if names != [c.name for c in want.tool_calls]:
            problems.append(f"tool calls {names} instead of {[c.name for c in want.tool_calls]}")
        else:
            for expected, event in zip(want.tool_calls, made, strict=True):
                differs = {k: v for k, v in expected.args.items()
                           if event["args"].get(k) != v}
                if differs:
                    problems.append(f"{expected.name} called with {event['args']}, expected "
                                    f"{differs}")
    return problems


async def run_suite(suite: EvalSuite, agents: Mapping[str, Agent],
                    model_for: Callable[[str], ChatModel], *,
                    services: HookServices | None = None) -> list[CaseResult]:
    """Run every case in order; a case's ``turns`` replace its agent's model.

    ``services`` are those the agents' hooks are built with (a declaration must still build,
    e.g. ``audit_log`` needs a database), even though none of them then runs.
    """
    results = []
    for case in suite.cases:
        agent_id = case.agent or suite.agent
        assert agent_id is not None  # the suite's validator ensures one
        agent = agents.get(agent_id)
        if agent is None:
            raise KeyError(f"case '{case.name}': no agent '{agent_id}' "
                           f"(agents: {', '.join(agents) or 'none'})")
        llm = ScriptedLLM(case.turns) if case.turns is not None else model_for(agent_id)
        engine = EvalEngine(llm, services=services, registries=build_registry)
        result = await engine.run(agent, case.message, user_id=agent.owner_user_id,
                                  org_id=agent.org_id)
        results.append(CaseResult(case, result, check(case, result)))
    return results
