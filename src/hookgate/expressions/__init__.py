"""The one owner of user-supplied expressions (rule, quorum and hook ``when``, workflow
conditions and placeholders): parsed with size limits, evaluated with bounded cost.

Every caller parses with `Expression.parse` and evaluates with `Expression.evaluate`; no other
module evaluates an expression."""

from hookgate.expressions.errors import ExpressionError, ExpressionInvalid, ExpressionTooCostly
from hookgate.expressions.evaluator import Expression
from hookgate.expressions.limits import ExpressionLimits

__all__ = ["Expression", "ExpressionError", "ExpressionInvalid", "ExpressionLimits",
           "ExpressionTooCostly"]
