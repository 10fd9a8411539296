"""Engines: ReAct (and, built on the same driver, DAG, delegation and workflows)."""

from hookgate.engines.dag import DAGEngine
from hookgate.engines.delegation import DelegatingReActEngine, Delegation
from hookgate.engines.driver import Lineage, RunStore
from hookgate.engines.events import RunEvent
from hookgate.engines.react import ReActEngine
from hookgate.engines.result import RunResult
from hookgate.engines.state import RunState

__all__ = [
    "DAGEngine",
    "DelegatingReActEngine",
    "Delegation",
    "Lineage",
    "ReActEngine",
    "RunEvent",
    "RunResult",
    "RunState",
    "RunStore",
]
