"""Parse and evaluate one user-supplied expression (simpleeval's language, never Python's
``eval``) within `ExpressionLimits`: the source is refused when too long, too deep or too
large; evaluation is stopped when a value would outgrow its limit or work or time run out."""

from __future__ import annotations

import ast
import math
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from simpleeval import (  # type: ignore[import-untyped]
    AttributeDoesNotExist,
    EvalWithCompoundTypes,
    FeatureNotAvailable,
    FunctionNotDefined,
    IterableTooLong,
    NumberTooHigh,
)

from hookgate.expressions.budget import Budget
from hookgate.expressions.errors import ExpressionInvalid, ExpressionTooCostly
from hookgate.expressions.limits import LIMITS, ExpressionLimits
from hookgate.expressions.operators import operators
from hookgate.expressions.values import MappingView

#: Methods an expression may call: each returns something no larger than what it reads.
_METHODS: dict[type, frozenset[str]] = {
    str: frozenset({
        "startswith", "endswith", "lower", "upper", "casefold", "title", "capitalize",
        "swapcase", "strip", "lstrip", "rstrip", "find", "rfind", "index", "rindex", "count",
        "split", "rsplit", "splitlines", "partition", "rpartition", "removeprefix",
        "removesuffix", "isdigit", "isalpha", "isalnum", "isnumeric", "isdecimal", "isspace",
        "islower", "isupper", "istitle", "isascii",
    }),
    dict: frozenset({"get", "keys", "values", "items"}),
    list: frozenset({"count", "index"}),
    tuple: frozenset({"count", "index"}),
    float: frozenset({"is_integer"}),
}
#: Nodes whose value the expression builds (rather than reads from its names).
_BUILDS = (ast.BinOp, ast.UnaryOp, ast.Call, ast.List, ast.Tuple, ast.Set, ast.Dict,
           ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.JoinedStr, ast.FormattedValue)
_NUMBER_IN_FORMAT = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class Expression:
    """A parsed expression: its source and syntax tree, already checked against the
    limits on length, depth and number of parts."""

    source: str
    tree: ast.expr
    limits: ExpressionLimits = LIMITS

    @classmethod
    def parse(cls, source: object, *, what: str = "expression",
              limits: ExpressionLimits = LIMITS) -> Expression:
        """``source`` parsed; ExpressionInvalid says what is wrong (``what`` names it)."""
        if not isinstance(source, str) or not source.strip():
            raise ExpressionInvalid(f"{what} must be a non-empty expression string")
        if len(source) > limits.max_chars:
            raise ExpressionInvalid(f"{what} is {len(source)} characters long; an expression "
                                    f"may have at most {limits.max_chars}")
        try:
            tree = ast.parse(source.strip(), mode="eval").body
        except SyntaxError as exc:
            raise ExpressionInvalid(f"{what} {source!r} is not a valid expression: {exc.msg}"
                                    ) from None
        except (RecursionError, MemoryError, ValueError) as exc:
            raise ExpressionInvalid(f"{what} cannot be read: {type(exc).__name__}: {exc}"
                                    ) from None
        _check_shape(tree, what, limits)
        return cls(source, tree, limits)

    def check_constant_parts(self, functions: Mapping[str, Callable[..., Any]]) -> None:
        """Evaluate, once, every part that reads no names (``3900000**1000000``,
        ``float('nan')``), so an expression that could only ever be stopped is refused when
        it is declared; ExpressionInvalid says which part and why. Other errors (a part that
        divides by zero) are left to evaluation, which fails closed."""
        evaluator = _BoundedEval(Budget(self.limits), {}, functions)
        evaluator.expr = self.source
        pending: list[ast.AST] = [self.tree]
        while pending:
            node = pending.pop()
            if isinstance(node, ast.expr) and not _reads_names(node, functions):
                try:
                    evaluator._eval(node)
                except (ExpressionTooCostly, IterableTooLong, NumberTooHigh,
                        RecursionError, MemoryError) as exc:
                    raise ExpressionInvalid(
                        f"expression {self.source!r} is refused: "
                        f"{ast.get_source_segment(self.source.strip(), node) or 'a part'} "
                        f"can never be evaluated ({exc})") from None
                except Exception:  # left to evaluation, which fails closed
                    pass
                continue
            pending.extend(ast.iter_child_nodes(node))

    def free_names(self) -> set[str]:
        """The names the expression reads (comprehension variables left out)."""
        bound = {
            n.id for c in ast.walk(self.tree) if isinstance(c, ast.comprehension)
            for n in ast.walk(c.target) if isinstance(n, ast.Name)
        }
        return {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name)} - bound

    def evaluate(self, names: Mapping[str, Any], functions: Mapping[str, Callable[..., Any]]
                 ) -> Any:
        """The expression's value over ``names``. ExpressionTooCostly when a value would
        outgrow the limits or work or time run out; other errors (a missing key, a type
        mismatch) are raised as they are."""
        evaluator = _BoundedEval(Budget(self.limits), names, functions)
        try:
            return evaluator.eval(self.source, previously_parsed=self.tree)
        except (IterableTooLong, NumberTooHigh) as exc:
            raise ExpressionTooCostly(str(exc)) from None
        except RecursionError:
            raise ExpressionTooCostly("the expression nests too deeply") from None
        except MemoryError:
            raise ExpressionTooCostly("the expression needs too much memory") from None

    def __str__(self) -> str:
        return self.source


def _reads_names(node: ast.AST, functions: Mapping[str, Any]) -> bool:
    """Whether ``node`` reads a name from outside itself (a function it calls, or a
    variable of a comprehension inside it, is not read)."""
    called = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    bound = {t.id for c in ast.walk(node) if isinstance(c, ast.comprehension)
             for t in ast.walk(c.target) if isinstance(t, ast.Name)}
    return any(isinstance(n, ast.Name) and n.id not in bound
               and not (id(n) in called and n.id in functions) for n in ast.walk(node))


def _check_shape(tree: ast.AST, what: str, limits: ExpressionLimits) -> None:
    count = 0
    pending: list[tuple[ast.AST, int]] = [(tree, 1)]
    while pending:
        node, depth = pending.pop()
        count += 1
        if count > limits.max_nodes:
            raise ExpressionInvalid(f"{what} has more than {limits.max_nodes} parts")
        if depth > limits.max_depth:
            raise ExpressionInvalid(f"{what} nests deeper than {limits.max_depth} levels")
        pending.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


class _BoundedEval(EvalWithCompoundTypes):  # type: ignore[misc]
    """simpleeval's evaluator with every step charged to a `Budget`, bounded operators,
    a closed list of methods and a size check on every value it builds."""

    def __init__(self, budget: Budget, names: Mapping[str, Any],
                 functions: Mapping[str, Callable[..., Any]]) -> None:
        super().__init__(operators=operators(budget), functions=dict(functions),
                         names=dict(names))
        self.budget = budget

    def _eval(self, node: ast.AST) -> Any:
        self.budget.charge(1)
        result = super()._eval(node)
        built = isinstance(node, _BUILDS) or (
            isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice))
        self._check_value(result, built=built)
        return result

    def _check_value(self, value: Any, *, built: bool) -> None:
        limits = self.budget.limits
        if isinstance(value, float) and not math.isfinite(value):
            raise ExpressionTooCostly(f"the expression reached {value}, not a finite number")
        if isinstance(value, complex):
            raise ExpressionTooCostly("the expression reached a complex number")
        if isinstance(value, int) and value.bit_length() > limits.max_int_bits:
            raise ExpressionTooCostly(f"a number would exceed {limits.max_int_bits} bits")
        if not built:
            return
        if isinstance(value, str | bytes):
            if len(value) > limits.max_text_chars:
                raise ExpressionTooCostly(
                    f"a text would exceed {limits.max_text_chars} characters")
        elif (isinstance(value, list | tuple | set | frozenset | dict)
              and self.budget.read(value) > limits.max_items):
            raise ExpressionTooCostly(f"a value would exceed {limits.max_items} items")

    def _check_disallowed_items(self, item: Any) -> None:
        # Methods are a closed list and functions the caller's, so what is left to refuse
        # is a module or a class; nothing is walked (a walk would be unbounded work).
        if isinstance(item, types.ModuleType | type):
            raise FeatureNotAvailable("modules and classes are not values in an expression")

    def _eval_attribute(self, node: ast.Attribute) -> Any:
        if node.attr.startswith("_"):
            raise FeatureNotAvailable(f"'.{node.attr}' is not available in an expression")
        base = self._eval(node.value)
        if isinstance(base, MappingView):
            try:
                return getattr(base, node.attr)
            except AttributeError:
                raise AttributeDoesNotExist(node.attr, self.expr) from None
        if node.attr in _METHODS.get(type(base), ()):
            return getattr(base, node.attr)
        if isinstance(base, dict):
            if node.attr in base:
                return base[node.attr]
            raise AttributeDoesNotExist(node.attr, self.expr)
        raise FeatureNotAvailable(
            f"'.{node.attr}' is not available on a {type(base).__name__} in an expression")

    def _eval_call(self, node: ast.Call) -> Any:
        if isinstance(node.func, ast.Attribute):
            func = self._eval(node.func)
            self.budget.read(getattr(func, "__self__", None))
        elif isinstance(node.func, ast.Name):
            if node.func.id not in self.functions:
                raise FunctionNotDefined(node.func.id, self.expr)
            func = self.functions[node.func.id]
        else:
            raise FeatureNotAvailable("only named functions and methods may be called")
        args = [self._eval(a) for a in node.args]
        kwargs = dict(self._eval(k) for k in node.keywords)
        for value in (*args, *kwargs.values()):
            self.budget.read(value)
        if func is round:
            ndigits = args[1] if len(args) > 1 else kwargs.get("ndigits", 0)
            if ndigits is not None and (not isinstance(ndigits, int)
                                        or abs(ndigits) > self.budget.limits.max_int_bits):
                raise ExpressionTooCostly("round() takes at most "
                                          f"{self.budget.limits.max_int_bits} digits")
        return func(*args, **kwargs)

    def _eval_joinedstr(self, node: ast.JoinedStr) -> str:
        parts: list[str] = []
        length = 0
        for value in node.values:
            evaluated = self._eval(value)
            self.budget.read(evaluated)
            text = str(evaluated)
            length += len(text)
            if length > self.budget.limits.max_text_chars:
                raise ExpressionTooCostly(
                    f"a text would exceed {self.budget.limits.max_text_chars} characters")
            parts.append(text)
        return "".join(parts)

    def _eval_formattedvalue(self, node: ast.FormattedValue) -> Any:
        value = self._eval(node.value)
        if not node.format_spec:
            return value
        spec = str(self._eval(node.format_spec))
        if any(len(n.lstrip("0")) > 3 for n in _NUMBER_IN_FORMAT.findall(spec)):
            raise ExpressionTooCostly(f"format {spec!r} asks for a text too wide")
        self.budget.read(value)
        return format(value, spec)
