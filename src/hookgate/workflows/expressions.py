"""Safe expressions over a workflow's input and node outputs (`hookgate.expressions`, never
eval, within its limits on size, work and time).

A condition node's ``expr`` is one expression. In a tool node's ``args`` and an agent
node's ``message``, ``{{ expr }}`` is replaced: a value that is exactly ``{{ expr }}``
takes the expression's value (a number stays a number), otherwise its text is spliced in.
(Not ``${...}``: the configuration file uses that for environment variables.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import simpleeval  # type: ignore[import-untyped]

from hookgate.expressions import Expression

#: ``{{ expr }}`` whose expression holds no ``{{`` or ``}}``: so "{{ a }} and {{ b }}" is two
#: placeholders, never one whose expression is "a }} and {{ b".
_PLACEHOLDER = re.compile(r"\{\{((?:(?!\{\{|\}\}).)*)\}\}", re.DOTALL)
_FUNCTIONS = {**simpleeval.DEFAULT_FUNCTIONS, "len": len, "min": min, "max": max,
              "abs": abs, "round": round}


class ExpressionError(ValueError):
    """An expression could not be evaluated; the message names it and the cause."""


def evaluate(expr: str, names: Mapping[str, Any]) -> Any:
    """``expr``'s value over ``names``; ExpressionError names it and why it failed (a
    syntax error, a missing name, a value or cost past the limits)."""
    try:
        return Expression.parse(expr).evaluate(names, _FUNCTIONS)
    except Exception as exc:
        raise ExpressionError(f"expression {expr!r} failed: {type(exc).__name__}: {exc}"
                              ) from None


def check(expr: str) -> None:
    """ExpressionError when ``expr`` could never be evaluated: not an expression, or past
    the limits on length, depth and number of parts."""
    try:
        Expression.parse(expr).check_constant_parts(_FUNCTIONS)
    except Exception as exc:
        raise ExpressionError(f"expression {expr!r} is invalid: {exc}") from None


def placeholders(value: Any) -> list[str]:
    """The expressions of every ``{{ expr }}`` inside ``value`` (strings, lists, mappings)."""
    if isinstance(value, str):
        return [m.group(1) for m in _PLACEHOLDER.finditer(value)]
    if isinstance(value, list):
        return [e for v in value for e in placeholders(v)]
    if isinstance(value, dict):
        return [e for v in value.values() for e in placeholders(v)]
    return []


def render(value: Any, names: Mapping[str, Any]) -> Any:
    """``value`` with every ``{{ expr }}`` inside it (strings, lists, mappings) evaluated."""
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value.strip())
        if whole:
            return evaluate(whole.group(1), names)
        return _PLACEHOLDER.sub(lambda m: _text(evaluate(m.group(1), names)), value)
    if isinstance(value, list):
        return [render(v, names) for v in value]
    if isinstance(value, dict):
        return {k: render(v, names) for k, v in value.items()}
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)
