"""Workflows: declared graphs of agent, tool and condition nodes, every tool call guarded."""

from hookgate.workflows.runner import WorkflowRunner
from hookgate.workflows.schema import (
    AgentNode,
    ConditionNode,
    Edge,
    ToolNode,
    Workflow,
    WorkflowError,
    load_workflow,
    parse_workflow,
)

__all__ = [
    "AgentNode",
    "ConditionNode",
    "Edge",
    "ToolNode",
    "Workflow",
    "WorkflowError",
    "WorkflowRunner",
    "load_workflow",
    "parse_workflow",
]
