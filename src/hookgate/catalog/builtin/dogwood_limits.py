"""The subset of Dogwood (Cedar's temporal extension) session limits hold: one ``forbid …
when temporal { count|sum … }`` or ``… unless temporal { formerly … }`` policy, read into the
native declaration that ``session_limits.parse_limit`` checks; anything else refused, named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hookgate.hooks.errors import HookBuildError

#: Dogwood's time units (it has no others).
UNITS = ("s", "m", "h", "d")
#: The event fields that say whom a limit counts for, and the request value each is pinned to.
SCOPES = {("callerPrincipal", "principal"): "user",
          ("callerResource", "resource"): "agent",
          ("session", "context.session"): "session",
          ("org", "context.org"): "org"}
#: Dogwood constructs outside the subset, by the token that starts them.
_UNSUPPORTED = {
    "since": "'since' (a condition held since an anchor)",
    "previous": "'previous' (the immediately preceding event)",
    "guardrails": "'guardrails' clauses (information providers)",
    "def": "macros ('def temporal')",
    "!": "negation '!'",
    "||": "'||'",
    "?": "macro parameters ('?p')",
    "$": "macro binders ('$t')",
    "decimal": "decimal literals (sums and caps are whole numbers in Dogwood)",
}
_TOKEN = re.compile(r"""\s+|//[^\n]*|"(?:\\.|[^"\\])*"|-?\d+|[A-Za-z_][A-Za-z0-9_]*
                        |::|==|!=|<=|>=|&&|\|\||[(){}\[\],:.;<>!@?$*]""", re.VERBOSE)


class Unsupported(HookBuildError):
    """A Dogwood policy outside the subset session limits can hold."""


@dataclass(frozen=True, slots=True)
class _Predicate:
    action: str
    kind: str
    fields: tuple[tuple[str, str], ...]


def tokens(text: str) -> list[str]:
    """The policy's tokens (comments and blanks dropped); HookBuildError at a character
    Dogwood does not have."""
    out: list[str] = []
    at = 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise HookBuildError(f"unexpected character {text[at]!r} at offset {at}")
        word = match.group(0)
        if not word.isspace() and not word.startswith("//"):
            out.append(word)
        at = match.end()
    return out


def declaration(where: str, text: object) -> dict[str, Any]:
    """The native declaration a Dogwood policy ``text`` stands for; Unsupported names the
    construct outside the subset, HookBuildError what else is wrong (one line each)."""
    if not isinstance(text, str) or not text.strip():
        raise HookBuildError(f"{where}: give one Dogwood policy as text, got {text!r:.60}")
    try:
        words = tokens(text)
        for before, word in zip(["<start>", *words], words, strict=False):
            if word in _UNSUPPORTED and before != ".":  # not an argument named so
                raise Unsupported(_UNSUPPORTED[word])
        return _Reader(words).policy()
    except Unsupported as exc:
        raise Unsupported(f"{where}: unsupported Dogwood construct: {exc}") from None
    except HookBuildError as exc:
        raise HookBuildError(f"{where}: {exc}") from None


class _Reader:
    """A reader of one policy of the subset, token by token."""

    def __init__(self, words: list[str]) -> None:
        self.words = words
        self.at = 0

    # -- tokens ---------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> str:
        i = self.at + ahead
        return self.words[i] if i < len(self.words) else "<end>"

    def take(self, *expected: str) -> str:
        word = self.peek()
        if expected and word not in expected:
            raise HookBuildError(f"expected {' or '.join(repr(e) for e in expected)}, "
                                 f"found {word!r}")
        self.at += 1
        return word

    def ident(self) -> str:
        word = self.take()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", word):
            raise HookBuildError(f"expected a name, found {word!r}")
        return word

    def integer(self) -> int:
        word = self.take()
        if not re.fullmatch(r"-?\d+", word):
            raise HookBuildError(f"expected a whole number, found {word!r}")
        return int(word)

    # -- the policy -----------------------------------------------------------------------
    def policy(self) -> dict[str, Any]:
        while self.peek() == "@":  # annotations: @id("…") and the like, kept by no one
            self.take("@")
            self.ident()
            self.take("(")
            self.string()
            self.take(")")
        effect = self.take("forbid", "permit")
        if effect == "permit":
            raise Unsupported("'permit' (a limit refuses: write forbid … when temporal, or "
                              "forbid … unless temporal for an approval)")
        self.take("(")
        self.take("principal")
        self.take(",")
        tools = self.scope()
        self.take(",")
        self.take("resource")
        self.take(")")
        clause = self.take("when", "unless")
        if self.peek() != "temporal":
            raise Unsupported(f"a plain Cedar '{clause} {{ … }}' condition (a limit is one "
                              "'temporal' clause; write Cedar conditions in the policies)")
        self.take("temporal")
        self.take("{")
        spec = self.counted(tools) if clause == "when" else self.approved(tools)
        self.take("}")
        if self.peek() == ";":
            self.take(";")
        if self.peek() != "<end>":
            raise Unsupported(f"more than one clause or policy (found {self.peek()!r} after "
                              "the temporal clause; one limit is one policy)")
        return spec

    def string(self) -> str:
        word = self.take()
        if not (len(word) >= 2 and word[0] == word[-1] == '"'):
            raise HookBuildError(f"expected a quoted string, found {word!r}")
        return word[1:-1]

    def action(self) -> str:
        first = self.ident()
        self.take("::")
        if first != "Action" or not self.peek().startswith('"'):
            raise Unsupported(f"a namespaced action ({first}::…): hookgate's actions are "
                              "Action::\"<tool>\"")
        return self.string()

    def scope(self) -> tuple[str, ...]:
        self.take("action")
        if self.take("==", "in") == "==":
            return (self.action(),)
        self.take("[")
        names = [self.action()]
        while self.peek() == ",":
            self.take(",")
            names.append(self.action())
        self.take("]")
        return tuple(names)

    def window(self) -> str:
        self.take("within")
        amount = self.integer()
        unit = self.take()
        if unit not in UNITS:
            raise HookBuildError(f"a window's unit is one of {', '.join(UNITS)}, found "
                                 f"{unit!r}")
        return f"{amount}{unit}"

    def predicate(self) -> _Predicate:
        name = self.action()
        self.take("::")
        kind = self.ident()
        self.take("{")
        fields: list[tuple[str, str]] = []
        while self.peek() != "}":
            path = [self.ident()]
            while self.peek() == ".":
                self.take(".")
                path.append(self.ident())
            self.take(":")
            fields.append((".".join(path), self.term()))
            if self.peek() != "}":
                self.take(",")
        self.take("}")
        if self.peek() == "{":
            raise Unsupported("field-injection blocks ('P{…}{…}')")
        return _Predicate(name, kind, tuple(fields))

    def term(self) -> str:
        word = self.take()
        if word in ("context", "principal", "resource"):
            while self.peek() == ".":
                self.take(".")
                word += "." + self.ident()
        return word

    # -- when temporal { count|sum … } ----------------------------------------------------
    def counted(self, tools: tuple[str, ...]) -> dict[str, Any]:
        if self.peek() == "exists":
            # exists (n: Long). ((AGG) == n && n > N)
            self.take("exists")
            self.take("(")
            bound = self.ident()
            self.take(":")
            self.take("Long")
            self.take(")")
            self.take(".")
            self.take("(")
            self.take("(")
            spec = self.aggregate(tools)
            self.take(")")
            self.take("==")
            if self.ident() != bound:
                raise HookBuildError(f"the aggregate must be bound to {bound!r}")
            self.take("&&")
            if self.ident() != bound:
                raise Unsupported(f"a condition on anything but {bound!r} beside the "
                                  "aggregate")
            op = self.comparison()
            cap = self.integer()
            self.take(")")
        elif self.peek() == "(":
            # (AGG) > N
            self.take("(")
            spec = self.aggregate(tools)
            self.take(")")
            op = self.comparison()
            cap = self.integer()
        else:
            # N < AGG
            cap = self.integer()
            op = {"<": ">", "<=": ">="}.get(self.take(), "?")
            if op == "?":
                raise Unsupported("a comparison other than N < aggregate or N <= aggregate")
            spec = self.aggregate(tools)
        return _capped(spec, op, cap)

    def comparison(self) -> str:
        op = self.take()
        if op not in (">", ">="):
            raise Unsupported(f"the comparison {op!r} (a limit refuses past a cap: > or >=)")
        return op

    def aggregate(self, tools: tuple[str, ...]) -> dict[str, Any]:
        which = self.take("count", "sum")
        summed = self.ident() if which == "sum" else None
        if summed == "_":
            raise HookBuildError("'_' is a wildcard, not a binder to sum")
        self.take("for")
        binders: list[tuple[str, str]] = []
        while True:
            self.take("(")
            name = self.ident()
            self.take(":")
            binders.append((name, self.ident()))
            self.take(")")
            if self.peek() != ",":
                break
            self.take(",")
        self.take(".")
        self.take("where")
        timepoints = [n for n, t in binders if t == "Timepoint"]
        values = [n for n, t in binders if t != "Timepoint"]
        if len(timepoints) != 1:
            raise Unsupported("an aggregate without one (t: Timepoint) binder (it "
                              "deduplicates equal values; a limit counts every call)")
        if which == "count" and values:
            raise Unsupported("a count of distinct values ('count for (x: …)')")
        if summed is not None and (values != [summed] or dict(binders)[summed] != "Long"):
            raise Unsupported("a sum over anything but its own (v: Long) binder and a "
                              "timepoint")
        wrapped = self.peek() == "(" and self.peek(1) == "formerly"
        if wrapped:
            self.take("(")
        self.take("formerly")
        window = self.window()
        self.take("(")
        found = self.predicate()
        self.take("&&")
        self.take("tp")
        self.take("(")
        if self.ident() != timepoints[0]:
            raise HookBuildError(f"tp(…) must bind the aggregate's timepoint "
                                 f"{timepoints[0]!r}")
        self.take(")")
        if self.peek() == "&&":
            raise Unsupported("a filter beside the predicate inside the aggregate")
        self.take(")")
        if wrapped:
            self.take(")")
        spec = _counted_calls(found, tools, summed)
        spec["window"] = window
        return spec

    # -- unless temporal { formerly … approved } -----------------------------------------
    def approved(self, tools: tuple[str, ...]) -> dict[str, Any]:
        if self.peek() != "formerly":
            raise Unsupported("'unless temporal' with anything but 'formerly within W "
                              "Action::\"Y\"::approved{ session: context.session }'")
        self.take("formerly")
        window = self.window()
        found = self.predicate()
        if found.kind != "approved":
            raise Unsupported(f"'unless temporal' over ::{found.kind} events (only an "
                              "approved call in the session: ::approved)")
        per = _per(found, summed=None)
        if per != "session":
            raise Unsupported(f"an approval looked for per {per} (only in the session: "
                              "session: context.session)")
        return {"tools": list(tools), "per": "session", "after_approved": found.action,
                "approved_within": window}


def _counted_calls(found: _Predicate, tools: tuple[str, ...],
                   summed: str | None) -> dict[str, Any]:
    """What a limit counts, from the predicate inside its aggregate."""
    if found.kind != "request":
        raise Unsupported(f"counting ::{found.kind} events (a limit counts ::request events, "
                          "calls in flight included)")
    if len(tools) != 1 or found.action != tools[0]:
        if found.action not in tools:
            raise Unsupported(f"counting calls of {found.action!r} to decide on "
                              f"{', '.join(map(repr, tools))} (a limit counts the calls it "
                              "refuses)")
        raise Unsupported("a predicate naming one of several actions in scope (a limit "
                          "over several tools counts them all: one policy per tool)")
    spec: dict[str, Any] = {"tools": list(tools), "per": _per(found, summed)}
    if summed is not None:
        paths = [path for path, term in found.fields if term == summed]
        if len(paths) != 1 or not paths[0].startswith("input."):
            raise Unsupported(f"a sum of {summed!r} not read from one argument "
                              "(input.<argument>)")
        spec["sum"] = paths[0].removeprefix("input.")
    return spec


def _per(found: _Predicate, summed: str | None) -> str:
    """Whom the predicate's correlation counts for; Unsupported for any other field."""
    pers = []
    for path, term in found.fields:
        if (path, term) in SCOPES:
            pers.append(SCOPES[(path, term)])
        elif term in ("_", "*") or (summed is not None and term == summed):
            continue
        else:
            raise Unsupported(f"the field pattern {path}: {term} (only a wildcard, the "
                              "summed binder, and one of callerPrincipal: principal, "
                              "callerResource: resource, session: context.session, "
                              "org: context.org)")
    if len(pers) != 1:
        raise Unsupported("a predicate without exactly one of callerPrincipal: principal, "
                          "callerResource: resource, session: context.session, org: "
                          "context.org (a limit counts per user, agent, session or org)")
    return pers[0]


def _capped(spec: dict[str, Any], op: str, cap: int) -> dict[str, Any]:
    """``forbid when AGG > cap`` admits up to ``cap``; ``>=`` up to one less (counts only)."""
    if "sum" in spec:
        if op != ">":
            raise Unsupported("a sum compared with '>=' (write > with the largest total "
                              "allowed)")
        return {**spec, "max": cap}
    return {**spec, "count": cap if op == ">" else cap - 1}
