"""Engines: ReAct (and, built on the same driver, DAG, delegation and workflows).

Each name loads on first use (PEP 562), so that ``hookgate/__init__.py`` can install the
default registry builder (hookgate.engines.registries) without importing every engine.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hookgate.engines.dag import DAGEngine
    from hookgate.engines.delegation import DelegatingReActEngine, Delegation
    from hookgate.engines.driver import Lineage, RunStore
    from hookgate.engines.events import RunEvent
    from hookgate.engines.react import ReActEngine
    from hookgate.engines.registries import RegistryBuilder
    from hookgate.engines.result import RunResult
    from hookgate.engines.state import RunState

    #: The engines a run can be started with, by name (`engine` in POST /api/runs,
    #: `--engine` in the CLI). Each gives agents that declare delegates the ``call_agent``
    #: tool. None of them can bypass hooks: that exists only in hookgate.evals.
    ENGINES: dict[str, type[DelegatingReActEngine]]

#: Where each name lives.
_HOMES = {
    "DAGEngine": "hookgate.engines.dag",
    "DelegatingReActEngine": "hookgate.engines.delegation",
    "Delegation": "hookgate.engines.delegation",
    "Lineage": "hookgate.engines.driver",
    "RunStore": "hookgate.engines.driver",
    "RunEvent": "hookgate.engines.events",
    "ReActEngine": "hookgate.engines.react",
    "RegistryBuilder": "hookgate.engines.registries",
    "RunResult": "hookgate.engines.result",
    "RunState": "hookgate.engines.state",
}


def __getattr__(name: str) -> Any:
    if name == "ENGINES":
        value: Any = {"react": __getattr__("DelegatingReActEngine"),
                      "dag": __getattr__("DAGEngine")}
    elif name in _HOMES:
        value = getattr(import_module(_HOMES[name]), name)
    else:
        raise AttributeError(f"module 'hookgate.engines' has no attribute {name!r}")
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES, "ENGINES"})


__all__ = [
    "ENGINES",
    "DAGEngine",
    "DelegatingReActEngine",
    "Delegation",
    "Lineage",
    "ReActEngine",
    "RegistryBuilder",
    "RunEvent",
    "RunResult",
    "RunState",
    "RunStore",
]
