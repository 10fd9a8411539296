"""Which tool calls a declarative hook fires for: a tool-name matcher and a `when` condition.

Matchers read the way Claude Code reads them. ``*``, an empty string or no matcher match every
tool. A matcher made only of letters, digits, ``_``, ``-``, spaces, ``,`` and ``|`` is an
exact tool name or a list of them separated by ``|`` or ``,`` (``oa__purchase_pay|oa__refund``,
``"Edit, Write"``; spaces around names are ignored). Anything else is a regular
expression (Python's ``re``) searched anywhere in the tool name, as Claude Code does: write
``^oa__.*$`` to match whole names. A ``re:`` prefix marks a regular expression explicitly.

``when`` is an expression over the call, evaluated by simpleeval (never Python's ``eval``):
``args.amount > 50000 and args.currency == "CNY"``. Names: ``args`` (the tool arguments,
key by attribute or ``args["key"]``), ``tool_name``, ``agent_id``, ``user_id``, ``org_id``
and ``metadata`` (the request facts). A condition that cannot be evaluated for a call (a
missing argument, a type mismatch) counts as a match: the hook runs, failing closed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simpleeval import EvalWithCompoundTypes  # type: ignore[import-untyped]

from hookgate.hooks.errors import HookBuildError
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
_NAMES = ("args", "tool_name", "agent_id", "user_id", "org_id", "metadata")
_CONSTANTS = {"True": True, "False": False, "None": None}


class Condition:
    """A parsed ``when`` expression; syntax and unknown names are build errors."""

    def __init__(self, source: object) -> None:
        if not isinstance(source, str) or not source.strip():
            raise HookBuildError("'when' must be a non-empty expression string")
        self.source = source
        try:
            self._tree = ast.parse(source.strip(), mode="eval").body
        except SyntaxError as exc:
            raise HookBuildError(f"'when' {source!r} is not a valid expression: {exc.msg}"
                                 ) from None
        unknown = _free_names(self._tree) - set(_NAMES) - set(_FUNCTIONS) - set(_CONSTANTS)
        if unknown:
            raise HookBuildError(
                f"'when' {source!r} uses unknown names {', '.join(sorted(unknown))} "
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
            "args": _view(ctx.tool_args),
            "tool_name": ctx.tool_name,
            "agent_id": ctx.agent_id,
            "user_id": ctx.user_id,
            "org_id": meta.get("org_id"),
            "metadata": _view(meta),
        }
        evaluator = EvalWithCompoundTypes(functions=dict(_FUNCTIONS), names=names)
        return evaluator.eval(self.source, previously_parsed=self._tree)

    def __str__(self) -> str:
        return self.source


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


def _free_names(tree: ast.AST) -> set[str]:
    bound = {
        n.id for c in ast.walk(tree) if isinstance(c, ast.comprehension)
        for n in ast.walk(c.target) if isinstance(n, ast.Name)
    }
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return used - bound


class _View:
    """A JSON object's keys as attributes (``args.amount``), and nothing else: no dict
    methods stand in for a tool argument called ``items`` or ``get``."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def __getattr__(self, key: str) -> Any:
        try:
            return _view(self._data[key])
        except KeyError:
            raise AttributeError(f"no key {key!r}") from None

    def __getitem__(self, key: str) -> Any:
        return _view(self._data[key])

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        return self._data == (other._data if isinstance(other, _View) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._data)


def _view(value: Any) -> Any:
    if isinstance(value, Mapping):
        return _View(value)
    if isinstance(value, list):
        return [_view(v) for v in value]
    return value
