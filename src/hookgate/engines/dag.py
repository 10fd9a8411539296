"""`DAGEngine`: the model plans steps with dependencies, the steps run, the model answers.

The first model turn is a plan (`hookgate.engines.plan`). A plan with an unknown tool, a
cycle, an unknown dependency or a repeated id is rejected before anything runs. Steps that
do not depend on each other run concurrently; every tool step takes the guarded path with
the agent's registry (``execution_path="dag"``), and a step that is blocked or fails skips
the steps that depend on it. The model then writes the answer from the steps' results.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hookgate.agent import Agent
from hookgate.engines.delegation import DelegatingReActEngine
from hookgate.engines.driver import Lineage, RunDriver
from hookgate.engines.events import EventSink
from hookgate.engines.graph import Readiness, run_graph, settle
from hookgate.engines.plan import Plan, PlanError, PlanStep, parse_plan, planning_prompt, raw_plan
from hookgate.engines.state import RunState
from hookgate.llm.base import ChatModel, ModelTurn
from hookgate.tools.calls import ToolCall

DEFAULT_MAX_PLAN_STEPS = 50


class DAGEngine(DelegatingReActEngine):
    """Plans, runs the plan's steps concurrently through the hooks, and answers.

    It shares the ReAct engine's plumbing (``run``, ``stream``, ``resume``, ``execute``,
    ``new_state``, delegation); only the loop differs. The model answers one question at a
    time, so a scripted list of turns plays in a predictable order; tool steps run at once.
    The plan and every settled step live in ``state.extra["dag"]``, so a run resumes.
    """

    name = "dag"

    def __init__(self, llm: ChatModel, *, max_plan_steps: int = DEFAULT_MAX_PLAN_STEPS,
                 **kwargs: Any) -> None:
        super().__init__(llm, **kwargs)
        self.max_plan_steps = max_plan_steps

    def _driver(self, agent: Agent, state: RunState, sink: EventSink,
                lineage: Lineage | None) -> RunDriver:
        return super()._driver(agent, state, sink, lineage or Lineage(execution_path="dag"))

    async def _loop(self, d: RunDriver) -> None:
        dag = d.state.extra.setdefault("dag", {})
        if "plan" not in dag and not await self._plan(d, dag):
            return
        plan = Plan.model_validate(dag["plan"])
        steps: dict[str, dict[str, Any]] = dag.setdefault("steps", {})
        model_turn = asyncio.Lock()

        def readiness(step_id: str) -> Readiness:
            for dep in plan.step(step_id).depends_on:
                if dep in steps and steps[dep]["status"] != "ok":
                    return "skip", f"step '{dep}' it depends on was {steps[dep]['status']}"
            done = all(dep in steps for dep in plan.step(step_id).depends_on)
            return ("run", "") if done else ("wait", "")

        async def skip(step_id: str, reason: str) -> None:
            steps[step_id] = {"status": "skipped", "result": None, "reason": reason}
            d.emit("step_skipped", {"step_id": step_id, "reason": reason})
            await d.checkpoint()

        async def run(step_id: str) -> None:
            step = plan.step(step_id)
            if step.tool is not None:
                settled = settle(await d.run_call(ToolCall(f"step_{step.id}", step.tool,
                                                            step.args)))
            else:
                async with model_turn:
                    settled = await self._answer(d, step, steps)
            steps[step_id] = settled
            d.emit("step_result", {"step_id": step_id, "kind": step.kind, **settled})
            await d.checkpoint()

        await run_graph([s.id for s in plan.steps], lambda s: s in steps, readiness, run, skip)
        answer = await self._ask(d, _summary(plan, steps))
        await d.finish("completed", answer=answer.answer or answer.content or "")

    async def _plan(self, d: RunDriver, dag: dict[str, Any]) -> bool:
        state = d.state
        if state.messages and state.messages[0].get("role") == "system":
            system = state.messages[0]["content"] or ""
            state.messages[0] = {"role": "system", "content": (
                f"{system}\n\n{planning_prompt(d.tools)}" if system
                else planning_prompt(d.tools))}
        turn = await self.llm.complete(list(state.messages), [])
        state.step += 1
        try:
            plan = parse_plan(raw_plan(turn), d.tools)
            if len(plan.steps) > self.max_plan_steps:
                raise PlanError(f"the plan has {len(plan.steps)} steps; at most "
                                f"{self.max_plan_steps} are allowed")
        except PlanError as exc:
            await d.finish("failed", error=f"plan rejected, nothing ran: {exc}")
            return False
        dag["plan"] = plan.model_dump(mode="json")
        state.messages.append({"role": "assistant", "content": _plan_text(plan)})
        d.emit("plan", {"steps": dag["plan"]["steps"]})
        await d.checkpoint()
        return True

    async def _answer(self, d: RunDriver, step: PlanStep,
                      steps: dict[str, dict[str, Any]]) -> dict[str, Any]:
        results = "\n".join(f"- {dep}: {steps[dep]['result']}" for dep in step.depends_on)
        prompt = (f"Step '{step.id}': {step.question}\n\n"
                  + (f"Results of the steps it depends on:\n{results}\n\n" if results else "")
                  + "Answer this step only, in plain text.")
        turn = await self._ask(d, prompt)
        if turn.tool_calls or turn.plan is not None:
            return {"status": "failed", "result": None, "reason": (
                "a question step cannot call tools or plan; tools run only as tool steps")}
        return {"status": "ok", "result": turn.answer or turn.content or "", "reason": None}

    async def _ask(self, d: RunDriver, prompt: str) -> ModelTurn:
        # Tools are not offered: in a DAG run they run only as steps of the accepted plan.
        messages = [*d.state.messages, {"role": "user", "content": prompt}]
        turn = await self.llm.complete(messages, [])
        d.state.step += 1
        reply = turn.answer or turn.content or ""
        d.state.messages.extend([messages[-1], {"role": "assistant", "content": reply}])
        return turn


def _summary(plan: Plan, steps: dict[str, dict[str, Any]]) -> str:
    lines = []
    for step in plan.steps:
        got = steps[step.id]
        what = f"tool {step.tool}" if step.tool else f"question {step.question!r}"
        detail = got["result"] if got["status"] == "ok" else got["reason"]
        lines.append(f"- {step.id} ({what}): {got['status']}: {detail}")
    return ("Every step of the plan has settled:\n" + "\n".join(lines)
            + "\n\nWrite the final answer to the user's request from these results. Say "
              "plainly which steps did not run and why.")


def _plan_text(plan: Plan) -> str:
    return json.dumps({"plan": plan.model_dump(mode="json")}, ensure_ascii=False, default=str)
