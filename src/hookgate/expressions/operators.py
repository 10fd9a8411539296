"""Arithmetic, comparison and membership for expressions, each bounded before it runs: a
result that would be larger than the limits (a huge power, shift, product or repetition) is
refused without being computed, and every operation pays for what it reads."""

from __future__ import annotations

import ast
import operator as op
from collections.abc import Callable
from typing import Any

from hookgate.expressions.budget import Budget
from hookgate.expressions.errors import ExpressionTooCostly

Operator = Callable[..., Any]

_SEQUENCES = (str, bytes, list, tuple)


def _int(value: Any) -> bool:
    return isinstance(value, int)


def operators(budget: Budget) -> dict[type, Operator]:
    """The operator table one evaluation uses, charging ``budget``."""
    limits = budget.limits

    def too_large(what: str, limit: str) -> ExpressionTooCostly:
        return ExpressionTooCostly(f"{what} would exceed {limit}")

    def bits(value: int) -> int:
        return abs(int(value)).bit_length()

    def check_bits(needed: int, what: str) -> None:
        if needed > limits.max_int_bits:
            raise too_large(what, f"{limits.max_int_bits} bits")

    def check_sequence(kind: Any, length: int, size: int, what: str) -> None:
        if isinstance(kind, str | bytes):
            if length > limits.max_text_chars:
                raise too_large(what, f"{limits.max_text_chars} characters")
        elif size > limits.max_items:
            raise too_large(what, f"{limits.max_items} items")

    def reading(fn: Operator) -> Operator:
        def bounded(*operands: Any) -> Any:
            for value in operands:
                budget.read(value)
            return fn(*operands)
        return bounded

    def add(a: Any, b: Any) -> Any:
        if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES):
            check_sequence(a, len(a) + len(b), budget.read(a) + budget.read(b),
                           "joining these")
        elif _int(a) and _int(b):
            check_bits(max(bits(a), bits(b)) + 1, "this sum")
        return a + b

    def mult(a: Any, b: Any) -> Any:
        if isinstance(b, _SEQUENCES) and _int(a):
            a, b = b, a
        if isinstance(a, _SEQUENCES) and _int(b):
            times = max(int(b), 0)
            # The copies share the container: what repeats is its elements.
            check_sequence(a, len(a) * times, (budget.read(a) - 1) * times + 1,
                           "this repetition")
        elif _int(a) and _int(b):
            check_bits(bits(a) + bits(b), "this product")
        else:
            budget.read(a)
            budget.read(b)
        return a * b

    def power(a: Any, b: Any) -> Any:
        # |a| ** b has about b * log2|a| bits: refused before it is computed.
        if _int(a) and _int(b) and b > 0 and bits(a) > 1 and (
                b > limits.max_int_bits or (bits(a) - 1) * int(b) > limits.max_int_bits):
            raise too_large("this power", f"{limits.max_int_bits} bits")
        return a ** b

    def lshift(a: Any, b: Any) -> Any:
        if _int(a) and _int(b) and b > 0:
            if b > limits.max_int_bits:
                raise too_large("this shift", f"{limits.max_int_bits} bits")
            check_bits(bits(a) + int(b), "this shift")
        return a << b

    def mod(a: Any, b: Any) -> Any:
        if isinstance(a, str | bytes):
            raise ExpressionTooCostly("text formatting with % is not available in an "
                                      "expression")
        return a % b

    def contains(a: Any, b: Any) -> bool:
        budget.read(a)
        budget.read(b)
        return a in b

    def not_contains(a: Any, b: Any) -> bool:
        return not contains(a, b)

    return {
        ast.Add: add, ast.Mult: mult, ast.Pow: power, ast.LShift: lshift, ast.Mod: mod,
        ast.Sub: reading(op.sub), ast.Div: reading(op.truediv),
        ast.FloorDiv: reading(op.floordiv), ast.RShift: reading(op.rshift),
        ast.BitXor: reading(op.xor), ast.BitOr: reading(op.or_),
        ast.BitAnd: reading(op.and_),
        ast.Eq: reading(op.eq), ast.NotEq: reading(op.ne), ast.Gt: reading(op.gt),
        ast.Lt: reading(op.lt), ast.GtE: reading(op.ge), ast.LtE: reading(op.le),
        ast.In: contains, ast.NotIn: not_contains,
        ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
        ast.Not: op.not_, ast.USub: op.neg, ast.UAdd: op.pos, ast.Invert: op.invert,
    }
