"""One evaluation's budget: units of work (each step, and each element an operation reads)
and a time limit, both checked at every step and every operation. The time is the
evaluating thread's own CPU time: an expression that never finishes spends it, while a
thread the machine or the GIL holds back spends none (a wall clock refused `".log" in
args.command` as too slow on a loaded machine)."""

from __future__ import annotations

import time
from typing import Any

from hookgate.expressions.errors import ExpressionTooCostly
from hookgate.expressions.limits import ExpressionLimits
from hookgate.expressions.values import size_of


class Budget:
    """Charged by the evaluator; raises ExpressionTooCostly once work or time runs out."""

    def __init__(self, limits: ExpressionLimits) -> None:
        self.limits = limits
        self.left = limits.max_work
        self.deadline = time.thread_time() + limits.max_seconds

    def charge(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise ExpressionTooCostly(
                f"the expression needs more than {self.limits.max_work} units of work")
        if time.thread_time() > self.deadline:
            raise ExpressionTooCostly(
                f"the expression ran longer than {self.limits.max_seconds:g} s")

    def read(self, value: Any) -> int:
        """Charge for reading ``value`` once (what comparing, copying or printing it costs)
        and return its size (`size_of`); never walks more than what is left."""
        size = size_of(value, self.left + 1)
        self.charge(size)
        return size
