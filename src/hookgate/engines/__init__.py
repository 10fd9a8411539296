"""Engines: ReAct (and, built on the same driver, DAG, delegation and workflows)."""

from hookgate.engines.dag import DAGEngine
from hookgate.engines.delegation import DelegatingReActEngine, Delegation
from hookgate.engines.driver import Lineage, RunStore
from hookgate.engines.events import RunEvent
from hookgate.engines.react import ReActEngine
from hookgate.engines.result import RunResult
from hookgate.engines.state import RunState

#: The engines a run can be started with, by name (`engine` in POST /api/runs, `--engine` in
#: the CLI). Each gives agents that declare delegates the ``call_agent`` tool. None of them
#: can bypass hooks: that exists only in hookgate.evals.
ENGINES: dict[str, type[DelegatingReActEngine]] = {"react": DelegatingReActEngine,
                                                   "dag": DAGEngine}

__all__ = [
    "ENGINES",
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
