"""What can go wrong with a user-supplied expression: it is refused when it is parsed
(`ExpressionInvalid`) or stopped while it is evaluated (`ExpressionTooCostly`)."""

from __future__ import annotations


class ExpressionError(ValueError):
    """An expression could not be parsed or evaluated; the message says why."""


class ExpressionInvalid(ExpressionError):
    """Refused before evaluation: not an expression, too long, too deep or too many parts."""


class ExpressionTooCostly(ExpressionError):
    """Stopped during evaluation: a value would grow past its limit, or the expression
    used up its work or time budget."""
