"""How large an expression and the values it builds may be, and how much work and time one
evaluation may take. One set of limits for every caller."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ExpressionLimits:
    """The bounds one evaluation runs under; the defaults are the product's."""

    #: Characters in the expression's source.
    max_chars: int = 4000
    #: Syntax-tree nodes, and how deeply they nest.
    max_nodes: int = 600
    max_depth: int = 40
    #: Bits in any integer the expression computes (a 4096-bit number has 1234 digits).
    max_int_bits: int = 4096
    #: Characters in any text the expression builds.
    max_text_chars: int = 100_000
    #: Size of any list, tuple, set or mapping it builds (elements, counted through nesting).
    max_items: int = 100_000
    #: Units of work for one evaluation: each step, and each element an operation reads.
    max_work: int = 1_000_000
    #: Wall-clock seconds for one evaluation (a backstop: the limits above keep it far lower).
    max_seconds: float = 1.0


LIMITS = ExpressionLimits()
