"""One evaluation's budget: units of work (each step, and each element an operation reads)
and a time limit, both checked at every step and every operation. The time is the
evaluating thread's own CPU time: an expression that never finishes spends it, while a
thread the machine or the GIL holds back spends none (a wall clock refused `".log" in
args.command` as too slow on a loaded machine). A full collection of the cyclic garbage
collector that happens to run in the evaluating thread is not counted either: its cost is
the process's whole heap, not the expression's, and in a large process it can outlast the
limit on its own (a rule then fails closed, and a person is asked about `echo`)."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

from hookgate.expressions.errors import ExpressionTooCostly
from hookgate.expressions.limits import ExpressionLimits
from hookgate.expressions.values import size_of


class _FullCollections(threading.local):
    """The CPU time this thread spent in full (generation 2) collections of the cyclic
    garbage collector: those scale with the heap. Younger generations are bounded by the
    collector's thresholds (a few thousand objects) and are not timed, so the common
    collections cost no clock reads."""

    spent = 0.0
    started: float | None = None


_FULL = _FullCollections()


def _time_full_collections(phase: str, info: dict[str, int]) -> None:
    if info["generation"] != 2:
        return
    if phase == "start":
        _FULL.started = time.thread_time()
    elif _FULL.started is not None:
        _FULL.spent += time.thread_time() - _FULL.started
        _FULL.started = None


gc.callbacks.append(_time_full_collections)


class Budget:
    """Charged by the evaluator; raises ExpressionTooCostly once work or time runs out."""

    def __init__(self, limits: ExpressionLimits) -> None:
        self.limits = limits
        self.left = limits.max_work
        self.deadline = time.thread_time() + limits.max_seconds
        self._collected = _FULL.spent

    def charge(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise ExpressionTooCostly(
                f"the expression needs more than {self.limits.max_work} units of work")
        if time.thread_time() > self.deadline and self._spent_past_deadline():
            raise ExpressionTooCostly(
                f"the expression ran longer than {self.limits.max_seconds:g} s")

    def _spent_past_deadline(self) -> bool:
        # Past the deadline by the thread's clock: is it still without the full collections
        # that ran in this thread meanwhile?
        collecting = _FULL.spent - self._collected
        return time.thread_time() - collecting > self.deadline

    def read(self, value: Any) -> int:
        """Charge for reading ``value`` once (what comparing, copying or printing it costs)
        and return its size (`size_of`); never walks more than what is left."""
        size = size_of(value, self.left + 1)
        self.charge(size)
        return size
