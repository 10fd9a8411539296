"""Engines: ReAct (and, built on the same driver, DAG, delegation and workflows)."""

from hookgate.engines.driver import Lineage, RunStore
from hookgate.engines.events import RunEvent
from hookgate.engines.react import ReActEngine
from hookgate.engines.result import RunResult
from hookgate.engines.state import RunState

__all__ = ["Lineage", "ReActEngine", "RunEvent", "RunResult", "RunState", "RunStore"]
