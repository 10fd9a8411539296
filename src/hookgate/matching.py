"""Which calls a rule applies to: a tool-name matcher and a ``when`` condition over a
HookContext. Declarative hooks, approval rules and quorums, Claude Code policies and the MCP
gateway's mappings all read them here.

Matchers read the way Claude Code reads them. ``*``, an empty string or no matcher match every
tool. A matcher made only of letters, digits, ``_``, ``-``, spaces, ``,`` and ``|`` is an
exact tool name or a list of them separated by ``|`` or ``,`` (``oa__purchase_pay|oa__refund``,
``"Edit, Write"``; spaces around names are ignored). Anything else is a regular
expression (Python's ``re``) searched anywhere in the tool name, as Claude Code does: write
``^oa__.*$`` to match whole names. A ``re:`` prefix marks a regular expression explicitly.

``when`` is an expression over the call, evaluated by `hookgate.expressions` (never Python's
``eval``), within its limits on size, work and time:
``args.amount > 50000 and args.currency == "CNY"``. Names: ``args`` (the tool arguments,
key by attribute or ``args["key"]``), ``tool_name``, ``agent_id``, ``user_id``, ``org_id``,
``metadata`` (the request facts) and ``provenance`` (where the argument values came from,
hookgate.provenance: ``"to" in provenance.untrusted_args``). A condition that cannot be
evaluated for a call (a missing argument, a type mismatch, a value or cost past the limits)
counts as a match: the hook runs, failing closed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hookgate.expressions import Expression, ExpressionInvalid
from hookgate.expressions.values import view_of
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.facts import PendingProvenance, ProvenanceNotTraced
from hookgate.hooks.model import HookContext

_EXACT = re.compile(r"[A-Za-z0-9_|, -]+")
_SEPARATORS = re.compile(r"[|,]")
_REGEX_PREFIX = "re:"


@dataclass(frozen=True, slots=True)
class ToolMatcher:
    """A parsed matcher; ``str()`` gives it back as declared (``*`` for all tools)."""

    source: str
    names: frozenset[str] | None = None
    pattern: re.Pattern[str] | None = None

    @classmethod
    def parse(cls, text: object) -> ToolMatcher:
        """Read a declared matcher; HookBuildError says what is wrong with a bad one."""
        if text is None or text in ("", "*"):
            return cls("*")
        if not isinstance(text, str):
            raise HookBuildError(f"'matcher' must be a string, got {type(text).__name__}")
        if text.startswith(_REGEX_PREFIX):
            return cls(text, pattern=_compile(text[len(_REGEX_PREFIX):], text))
        if _EXACT.fullmatch(text):
            names = [n.strip() for n in _SEPARATORS.split(text)]
            if "" in names or any(" " in n for n in names):
                raise HookBuildError(f"matcher {text!r} has an empty name or a name with a "
                                     "space in it (separate names with '|' or ',')")
            return cls(text, names=frozenset(names))
        return cls(text, pattern=_compile(text, text))

    def matches(self, tool_name: str | None) -> bool:
        if self.names is None and self.pattern is None:
            return True
        if tool_name is None:
            return False
        if self.names is not None:
            return tool_name in self.names
        assert self.pattern is not None
        return self.pattern.search(tool_name) is not None

    def __str__(self) -> str:
        return self.source


def _compile(pattern: str, declared: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise HookBuildError(f"matcher {declared!r} is not a valid regular expression: {exc}"
                             ) from None


#: Functions a condition may call; simpleeval's random functions are left out on purpose.
_FUNCTIONS: dict[str, Any] = {
    "int": int, "float": float, "str": str, "bool": bool, "len": len, "abs": abs,
    "min": min, "max": max, "round": round, "any": any, "all": all,
}
_NAMES = ("args", "tool_name", "agent_id", "user_id", "org_id", "metadata", "provenance")
#: ``provenance`` of a context that has none (before the guarded path traced the call).
_NO_PROVENANCE = {"untrusted": False, "untrusted_args": [], "origins": [],
                  "untrusted_results": 0}
_CONSTANTS = {"True": True, "False": False, "None": None}


class Condition:
    """A parsed ``when`` expression; syntax and unknown names are build errors."""

    def __init__(self, source: object) -> None:
        try:
            self.expression = Expression.parse(source, what="'when'")
            self.expression.check_constant_parts(_FUNCTIONS)
        except ExpressionInvalid as exc:
            raise HookBuildError(str(exc)) from None
        self.source = self.expression.source
        names = self.expression.free_names()
        #: The condition may read the call's provenance (``provenance``, or ``metadata``
        #: whose ``provenance`` key holds it): it must be traced before it is evaluated.
        self.reads_provenance = not names.isdisjoint({"provenance", "metadata"})
        self._names_provenance = "provenance" in names
        unknown = names - set(_NAMES) - set(_FUNCTIONS) - set(_CONSTANTS)
        if unknown:
            raise HookBuildError(
                f"'when' {self.source!r} uses unknown names {', '.join(sorted(unknown))} "
                f"(known: {', '.join(_NAMES)}; tool arguments are args.<name>)"
            )

    def holds(self, ctx: HookContext) -> bool:
        """Evaluate for ``ctx``; raises when the expression cannot be evaluated."""
        return bool(self.value(ctx))

    def holds_exactly(self, ctx: HookContext) -> bool:
        """True only when the expression is the boolean True for ``ctx`` (what a rule that
        grants something needs: ``args.vendor`` being a non-empty string is not a yes)."""
        return self.value(ctx) is True

    def value(self, ctx: HookContext) -> Any:
        """The expression's value for ``ctx``; raises when it cannot be evaluated."""
        meta = ctx.metadata
        names = {
            **_CONSTANTS,
            "args": view_of(ctx.tool_args),
            "tool_name": ctx.tool_name,
            "agent_id": ctx.agent_id,
            "user_id": ctx.user_id,
            "org_id": meta.get("org_id"),
            "metadata": view_of(meta),
        }
        if self._names_provenance:
            names["provenance"] = view_of(_traced(meta.get("provenance")))
        return self.expression.evaluate(names, _FUNCTIONS)

    def __str__(self) -> str:
        return self.source


def _traced(provenance: Any) -> Any:
    # Not yet traced (no hook said it reads it): the condition cannot be evaluated, and
    # fails closed, rather than reading as "nothing untrusted".
    if isinstance(provenance, PendingProvenance):
        raise ProvenanceNotTraced(
            "the call's provenance was not traced before this condition was evaluated")
    return provenance or _NO_PROVENANCE


def selects(matcher: ToolMatcher, when: Condition | None, ctx: HookContext
            ) -> tuple[bool, str | None]:
    """Whether ``matcher`` and ``when`` pick ``ctx``'s call. A ``when`` that cannot be
    evaluated picks it (fail closed); the second value then says why it could not."""
    if not matcher.matches(ctx.tool_name):
        return False, None
    if when is None:
        return True, None
    try:
        return when.holds(ctx), None
    except Exception as exc:
        return True, f"{type(exc).__name__}: {exc}"


def not_evaluated(failure: str) -> str:
    """How a rule that picked a call only because its ``when`` could not be evaluated says
    so (``failure``: the reason `selects` gave), in the words its reasons show a person."""
    return f"its condition could not be evaluated: {failure}"
