"""The DAG engine's plan: the shape a model answers with, and the checks before anything runs.

A plan is ``{"plan": {"steps": [...]}}`` (or just ``{"steps": [...]}``). Each step has an
``id``, ``depends_on`` (ids of earlier or later steps), and either a ``tool`` with ``args``
or a ``question`` the model answers from the results of the steps it depends on::

    {"plan": {"steps": [
        {"id": "quote", "tool": "oa__quote", "args": {"vendor": "ACME"}, "depends_on": []},
        {"id": "pay", "tool": "oa__purchase_pay", "args": {"amount": 100, "vendor": "ACME"},
         "depends_on": ["quote"]},
        {"id": "sum", "question": "How much was paid?", "depends_on": ["pay"]}]}}

A scripted model gives the plan as a turn ``{"plan": {...}}``; any other model writes the
JSON as its answer text (a fenced ```json block is fine).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hookgate.engines.graph import GraphError, check_graph
from hookgate.llm.base import ModelTurn
from hookgate.tools.arguments import ArgumentsRefused, check_arguments, parse_arguments
from hookgate.tools.tool import Tool


class PlanError(ValueError):
    """The plan cannot run as given; nothing of it ran."""


class PlanStep(BaseModel):
    """One step: a tool call, or a question for the model."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=128)
    tool: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    question: str | None = None
    depends_on: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _tool_or_question(self) -> PlanStep:
        if (self.tool is None) == (self.question is None):
            raise ValueError(f"step '{self.id}' needs exactly one of 'tool' or 'question'")
        if self.question is not None and self.args:
            raise ValueError(f"step '{self.id}' is a question and cannot take 'args'")
        return self

    @property
    def kind(self) -> str:
        return "tool" if self.tool is not None else "question"


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    steps: list[PlanStep] = Field(min_length=1)

    def step(self, step_id: str) -> PlanStep:
        return next(s for s in self.steps if s.id == step_id)


PLAN_INSTRUCTIONS = """\
Plan before you act. Answer with JSON only, of this shape:
{"plan": {"steps": [
  {"id": "s1", "tool": "<tool name>", "args": {...}, "depends_on": []},
  {"id": "s2", "question": "<what to work out from earlier results>", "depends_on": ["s1"]}
]}}
Each step is a tool call or a question. A step runs after the steps it depends on; steps
that do not depend on each other run at the same time. Use the tool names exactly as listed.
Tools:
"""


def planning_prompt(tools: Mapping[str, Tool]) -> str:
    """The instructions added to the system message for the planning turn."""
    lines = [f"- {t.name}: {t.description or '(no description)'} parameters: "
             f"{json.dumps(t.parameters, ensure_ascii=False)}" for t in tools.values()]
    return PLAN_INSTRUCTIONS + ("\n".join(lines) if lines else "(none)")


def raw_plan(turn: ModelTurn) -> Any:
    """The plan a turn carries, before any check: a scripted plan, tool calls made directly
    (taken as independent steps), or JSON in the answer text."""
    if turn.plan is not None:
        return turn.plan
    if turn.tool_calls:
        return {"steps": [{"id": c.id or f"s{i + 1}", "tool": c.name, "args": c.args,
                           "depends_on": []} for i, c in enumerate(turn.tool_calls)]}
    text = turn.answer if turn.answer is not None else turn.content
    return _json_in(text or "")


def _json_in(text: str) -> Any:
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    body = fenced.group(1) if fenced else text
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        raise PlanError("the model's answer holds no JSON plan")
    try:
        return parse_arguments(body[start:end + 1])
    except ArgumentsRefused as exc:
        raise PlanError(f"the model's plan cannot be accepted: {exc}") from None


def parse_plan(raw: Any, tools: Mapping[str, Tool]) -> Plan:
    """Check a plan's shape, graph and tool names; PlanError says what is wrong."""
    if isinstance(raw, Mapping) and "plan" in raw:
        raw = raw["plan"]
    if not isinstance(raw, Mapping):
        raise PlanError(f"a plan must be a mapping with 'steps', got {type(raw).__name__}")
    try:
        # The whole plan is what the model asked for: held to the arguments' rules.
        check_arguments(raw)
    except ArgumentsRefused as exc:
        raise PlanError(f"the plan cannot be accepted: {exc}") from None
    try:
        plan = Plan.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'plan'}: {e['msg']}" for e in exc.errors())
        raise PlanError(f"the plan's shape is wrong: {problems}") from None
    try:
        check_graph([s.id for s in plan.steps], {s.id: s.depends_on for s in plan.steps},
                    "step")
    except GraphError as exc:
        raise PlanError(str(exc)) from None
    for step in plan.steps:
        # Exact names only: a near miss (case, spaces, a look-alike letter) is unknown.
        if step.tool is not None and step.tool not in tools:
            raise PlanError(f"step '{step.id}' uses unknown tool {step.tool!r} "
                            f"(available: {', '.join(sorted(tools)) or 'none'})")
    return plan
