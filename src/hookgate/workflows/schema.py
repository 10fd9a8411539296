"""A workflow's declaration (YAML): nodes, the edges between them, and whose identity its
tool nodes use. The same shape is a ``workflows:`` entry of the configuration file and the
whole of a workflow file::

    id: pay-if-cheap
    as_agent: buyer              # tool nodes run with this agent's registry and identity
    output: report               # the node whose output is the run's answer (default: last)
    nodes:
      - {id: quote, type: tool, tool: oa__quote, args: {vendor: ACME}}
      - {id: cheap, type: condition, expr: "quote.amount <= 50000"}
      - {id: pay, type: tool, tool: oa__purchase_pay,
         args: {amount: "{{ quote.amount }}", vendor: ACME}}
      - {id: report, type: agent, agent: writer, message: "Summarise: {{ pay }}"}
    edges:
      - {from: quote, to: cheap}
      - {from: cheap, to: pay, when: true}
      - {from: pay, to: report}

A node runs once every node with an edge into it has settled ``ok`` and every ``when`` on
those edges matches its condition; otherwise it is skipped, with the reason in the trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hookgate.engines.graph import GraphError, check_graph
from hookgate.workflows.expressions import ExpressionError, check, placeholders

NodeId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class WorkflowError(ValueError):
    """The workflow cannot run as declared; nothing of it ran."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ToolNode(_Strict):
    """Calls one tool through the guarded path as the workflow's ``as_agent``."""

    id: NodeId
    type: Literal["tool"]
    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)


class AgentNode(_Strict):
    """Runs an agent (with its own registry) on ``message``; its answer is the output."""

    id: NodeId
    type: Literal["agent"]
    agent: str = Field(min_length=1)
    message: str = "{{ input }}"


class ConditionNode(_Strict):
    """A safe expression over the input and earlier outputs; its output is a bool."""

    id: NodeId
    type: Literal["condition"]
    expr: str = Field(min_length=1)


Node = Annotated[ToolNode | AgentNode | ConditionNode, Field(discriminator="type")]


class Edge(_Strict):
    source: str = Field(alias="from")
    to: str
    when: bool | None = None


def _check_expressions(node: ToolNode | AgentNode | ConditionNode) -> None:
    """Refuse, when the workflow is declared, an expression that could never be evaluated."""
    if isinstance(node, ConditionNode):
        exprs = [node.expr]
    else:
        exprs = placeholders(node.args if isinstance(node, ToolNode) else node.message)
    for expr in exprs:
        try:
            check(expr)
        except ExpressionError as exc:
            raise ValueError(f"node '{node.id}': {exc}") from None


class Workflow(_Strict):
    id: NodeId
    name: str | None = None
    description: str | None = None
    as_agent: str = Field(min_length=1)
    output: str | None = None
    nodes: list[Node] = Field(min_length=1)
    edges: list[Edge] = Field(default_factory=list)

    @model_validator(mode="after")
    def _graph(self) -> Workflow:
        ids = [n.id for n in self.nodes]
        try:
            check_graph(ids, self.dependencies(), "node")
        except GraphError as exc:
            raise ValueError(str(exc)) from None
        by_id = {n.id: n for n in self.nodes}
        for node in self.nodes:
            _check_expressions(node)
        for edge in self.edges:
            for end in (edge.source, edge.to):
                if end not in by_id:
                    raise ValueError(f"edge {edge.source} → {edge.to}: unknown node '{end}'")
            if edge.when is not None and not isinstance(by_id[edge.source], ConditionNode):
                raise ValueError(f"edge {edge.source} → {edge.to}: 'when' needs a condition "
                                 f"node at its start; '{edge.source}' is a "
                                 f"{by_id[edge.source].type} node")
        if self.output is not None and self.output not in by_id:
            raise ValueError(f"output names unknown node '{self.output}'")
        return self

    def dependencies(self) -> dict[str, list[str]]:
        deps: dict[str, list[str]] = {n.id: [] for n in self.nodes}
        for edge in self.edges:
            deps.setdefault(edge.to, []).append(edge.source)
        return deps

    def node(self, node_id: str) -> ToolNode | AgentNode | ConditionNode:
        return next(n for n in self.nodes if n.id == node_id)

    def incoming(self, node_id: str) -> list[Edge]:
        return [e for e in self.edges if e.to == node_id]


def parse_workflow(data: Any, source: str = "<workflow>") -> Workflow:
    """A Workflow from parsed YAML; WorkflowError lists what is wrong, by location."""
    try:
        return Workflow.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'workflow'}: {e['msg']}"
                             for e in exc.errors())
        raise WorkflowError(f"{source}: {problems}") from None


def load_workflow(path: str | Path) -> Workflow:
    """Read one workflow from a YAML file."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise WorkflowError(f"{path}: cannot read the workflow: {exc}") from None
    return parse_workflow(data, str(path))
