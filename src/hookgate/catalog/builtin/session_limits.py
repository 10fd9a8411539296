"""`session_limits`: limits over time, per user, agent, session or org, declared in config:
at most N calls or a sum of an argument within a sliding window, and "only after an approved
call of X in this session". The counts live in one place (storage/session_limits.py).

    {name: session_limits, params: {limits: {
        transfers: {tools: [transfer], per: user, window: 1h, sum: amount, max: 5000},
        deletes: {tools: ["delete_*"], per: session, window: 1d, count: 20},
        refunds: {tools: [refund], after_approved: review}}}}

A limit may instead be one Dogwood policy (``{dogwood: "forbid(…) when temporal {…};"}``):
the subset that fits (dogwood_limits.py) is read into the same declaration, checked here.

A call takes its claims when this hook admits it, before it runs, so calls in flight count;
right before the approval gate (and after a person decided) the claim is taken again with
the call's final arguments, so a later rewrite or an approver's edit is what is counted.
What becomes of a claim (this module is its one owner): a call refused later (another hook,
the policies, a person's rejection, the approval check) or a tool that fails gives it back;
a call waiting for a person keeps it (asked again after the decision it takes no second);
a call that ran keeps it until it leaves the window, whatever is later said of its call id.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fnmatch import fnmatchcase
from typing import Any

from hookgate.approvals.gate import GATE_PRIORITY
from hookgate.catalog.builtin.dogwood_limits import declaration as dogwood_declaration
from hookgate.catalog.builtin.params import reject_unknown_params, require_database
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext, HookResult, PostToolUseHook, PreToolUseHook
from hookgate.policies.facts import LIMITS_KEY
from hookgate.storage.session_limits import (
    AMOUNT_SCALE,
    MAX_UNITS,
    Claimed,
    LimitClaims,
    Standing,
    Want,
)
from hookgate.tools.calls import ToolOutcome

NAME = "session_limits"
#: After the read-only guard, before the policies (20): a call the limits refuse asks
#: nobody, and a refusal by anything after this gives the claim back (``on_blocked``).
SESSION_LIMITS_PRIORITY = 15
PER = ("user", "agent", "session", "org")
#: The longest window: a year (older claims are never read).
MAX_WINDOW_S = 366 * 86_400
_PARAMS = ("limits",)
_LIMIT_KEYS = ("tools", "per", "window", "count", "sum", "max", "after_approved",
               "approved_within")
#: A limit written as one Dogwood policy: its only key.
DOGWOOD = "dogwood"
_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60,
          "h": 3600, "hour": 3600, "d": 86400, "day": 86400}
_WINDOW = re.compile(r"\s*(\d+)\s*([a-z]+?)s?\s*", re.IGNORECASE)
_LIMIT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_ALLOW = HookResult()
#: The approval gate's exception while a person has not decided yet: the call waits, and
#: keeps its claims (approvals/persistent.py StillPending).
_WAITING = ": StillPending"


class LimitRefused(Exception):
    """A call the limits cannot admit, or cannot judge (then it is refused too)."""


@dataclass(frozen=True, slots=True)
class Limit:
    """One declared limit."""

    name: str
    tools: tuple[str, ...]
    per: str
    window_s: int
    count: int | None = None
    #: The argument whose values are summed (a dotted path), and the cap in units.
    sum: str | None = None
    max_units: int | None = None
    after_approved: str | None = None
    #: How far back an approval of ``after_approved`` counts (None: the whole session).
    approved_within_s: int | None = None

    def covers(self, tool: str) -> bool:
        return any(fnmatchcase(tool, pattern) for pattern in self.tools)

    @property
    def text(self) -> str:
        parts = []
        if self.count is not None:
            parts.append(f"at most {self.count} calls")
        if self.sum is not None and self.max_units is not None:
            parts.append(f"at most {_shown(self.max_units)} in {self.sum}")
        if self.count is not None or self.sum is not None:
            parts.append(f"per {self.per} per {_window_text(self.window_s)}")
        if self.after_approved is not None:
            parts.append(f"only after an approved call of {self.after_approved} in the session"
                         + ("" if self.approved_within_s is None else
                            f" within {_window_text(self.approved_within_s)}"))
        return " ".join(parts)


def parse_window(where: str, value: object, key: str = "window") -> int:
    """Seconds of a window such as '1h', '30 minutes', '90s', '1 day'."""
    match = _WINDOW.fullmatch(value) if isinstance(value, str) else None
    unit = _UNITS.get(match.group(2).lower()) if match else None
    if match is None or unit is None:
        raise HookBuildError(f"{where}.{key}: {value!r} is not a window such as '1h', "
                             "'30 minutes' or '90s' (units: second, minute, hour, day)")
    seconds = int(match.group(1)) * unit
    if not 1 <= seconds <= MAX_WINDOW_S:
        raise HookBuildError(f"{where}.{key}: {value!r} must be from one second to "
                             "366 days")
    return seconds


def amount_units(where: str, value: object) -> int:
    """``value`` as whole ten-thousandths; LimitRefused for anything but a finite, non-negative
    number with at most four decimal places within range (a string, NaN, inf, a bool…)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LimitRefused(f"{where} is {type(value).__name__} {value!r:.40}, not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise LimitRefused(f"{where} = {value} is not a finite number")
    try:
        exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation as exc:  # pragma: no cover - repr of a finite float parses
        raise LimitRefused(f"{where} = {value!r:.40} is not a number") from exc
    if exact < 0:
        raise LimitRefused(f"{where} = {value} is negative")
    units = exact * AMOUNT_SCALE
    if units != units.to_integral_value():
        raise LimitRefused(f"{where} = {value} has more than four decimal places")
    if units > MAX_UNITS:
        raise LimitRefused(f"{where} = {value:.6g} is too large to count")
    return int(units)


def _max_units(where: str, value: object) -> int:
    try:
        return amount_units(f"{where}.max", value)
    except LimitRefused as exc:
        raise HookBuildError(str(exc)) from None


def _argument_type(schema: Mapping[str, Any], path: str) -> str | None:
    """The JSON-schema type of ``path`` (dotted) in a tool's parameters, or None."""
    node: Any = schema
    for part in path.split("."):
        props = node.get("properties") if isinstance(node, Mapping) else None
        node = props.get(part) if isinstance(props, Mapping) else None
        if node is None:
            return None
        options = node.get("anyOf") if isinstance(node, Mapping) else None
        if isinstance(options, list):
            kept = [o for o in options if isinstance(o, Mapping) and o.get("type") != "null"]
            node = kept[0] if len(kept) == 1 else {}
    kind = node.get("type") if isinstance(node, Mapping) else None
    return kind if isinstance(kind, str) else None


def parse_limit(name: object, raw: object, tools: Mapping[str, Mapping[str, Any]]) -> Limit:
    """One declaration, checked against the agent's own tools (``tools``: name → JSON
    schema of its parameters); HookBuildError says what is wrong, in one line."""
    where = f"limits.{name}"
    if not isinstance(name, str) or not _LIMIT_NAME.fullmatch(name):
        raise HookBuildError(f"{where}: a limit's name is letters, digits and _ (not "
                             "starting with a digit)")
    if not isinstance(raw, Mapping):
        raise HookBuildError(f"{where} must be a mapping of {', '.join(_LIMIT_KEYS)}")
    if DOGWOOD in raw:
        if len(raw) != 1:
            raise HookBuildError(f"{where}: a limit written in Dogwood has no other keys "
                                 f"(found {', '.join(sorted(map(str, raw)))})")
        raw = dogwood_declaration(f"{where}.{DOGWOOD}", raw[DOGWOOD])
    unknown = sorted(set(map(str, raw)) - set(_LIMIT_KEYS))
    if unknown:
        raise HookBuildError(f"{where}: unknown keys {', '.join(unknown)} (known: "
                             f"{', '.join(_LIMIT_KEYS)}; or {DOGWOOD} alone)")
    patterns = raw.get("tools")
    if isinstance(patterns, str):
        patterns = [patterns]
    if (not isinstance(patterns, list) or not patterns
            or not all(isinstance(p, str) and p for p in patterns)):
        raise HookBuildError(f"{where}.tools must name the tools it covers (names or "
                             f"patterns such as 'delete_*'), got {patterns!r}")
    after = raw.get("after_approved")
    if after is not None and (not isinstance(after, str) or not after):
        raise HookBuildError(f"{where}.after_approved must be a tool name, got {after!r}")
    count, total, cap = raw.get("count"), raw.get("sum"), raw.get("max")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int)
                              or count < 1):
        raise HookBuildError(f"{where}.count must be a whole number of calls of at least 1, "
                             f"got {count!r}")
    if (total is None) != (cap is None):
        raise HookBuildError(f"{where}: 'sum' (the argument summed) and 'max' (its cap) "
                             "go together")
    if count is None and total is None and after is None:
        raise HookBuildError(f"{where} limits nothing: give count, sum and max, or "
                             "after_approved")
    counted = count is not None or total is not None
    per = raw.get("per", "session" if not counted else None)
    if per not in PER:
        raise HookBuildError(f"{where}.per must be one of {', '.join(PER)}, got {per!r}")
    if counted:
        window = parse_window(where, raw.get("window"))
    elif raw.get("window") is not None:
        raise HookBuildError(f"{where}.window counts calls: give count or sum with it")
    else:
        window = MAX_WINDOW_S
    if after is not None and per != "session":
        raise HookBuildError(f"{where}: after_approved looks at the session's calls: per "
                             "must be session")
    within = raw.get("approved_within")
    if within is not None and after is None:
        raise HookBuildError(f"{where}.approved_within is how far back an approval counts: "
                             "give after_approved with it")
    within_s = None if within is None else parse_window(where, within, "approved_within")
    max_units = None
    if total is not None:
        if not isinstance(total, str) or not all(total.split(".")):
            raise HookBuildError(f"{where}.sum must be an argument's name (a.b for a "
                                 f"nested one), got {total!r}")
        max_units = _max_units(where, cap)
        for tool, schema in tools.items():
            if not any(fnmatchcase(tool, p) for p in patterns):
                continue
            kind = _argument_type(schema, total)
            if kind is None:
                raise HookBuildError(f"{where}.sum: tool '{tool}' has no argument {total!r}")
            if kind not in ("integer", "number"):
                raise HookBuildError(f"{where}.sum: argument {total!r} of tool '{tool}' is "
                                     f"{kind}, not a number")
    return Limit(name, tuple(patterns), str(per), window, count, total, max_units, after,
                 within_s)


class SessionLimits(PreToolUseHook):
    """Claims each call against the limits that cover its tool; refuses it when one is
    used up, when it would pass one, or when its tool needs an approved call first."""

    name = NAME
    priority = SESSION_LIMITS_PRIORITY
    fail_mode = "closed"

    def __init__(self, limits: Sequence[Limit], claims: LimitClaims) -> None:
        self.limits = tuple(limits)
        self.claims = claims
        #: Tools whose approved calls unlock others (recorded after they run).
        self.unlocking = frozenset(lim.after_approved for lim in self.limits
                                   if lim.after_approved is not None)
        self.companions = (SessionLimitsFinal(self), SessionLimitOutcomes(self))

    @classmethod
    def from_declaration(cls, params: dict[str, Any], env: Any) -> SessionLimits:
        reject_unknown_params(NAME, params, _PARAMS)
        raw = params.get("limits")
        if not isinstance(raw, Mapping) or not raw:
            raise HookBuildError("limits must map names to limits, e.g. {deletes: {tools: "
                                 "[delete_file], per: session, window: 1h, count: 20}}")
        agent = getattr(env, "agent", None)
        tools = {t.name: t.parameters for t in getattr(agent, "tools", ())}
        limits = [parse_limit(name, spec, tools) for name, spec in raw.items()]
        db = require_database(NAME, env, "its claims")
        return cls(limits, LimitClaims(db))

    @property
    def matcher(self) -> str:
        """What `hookgate check` shows."""
        return "; ".join(f"{lim.name}: {lim.text}" for lim in self.limits)

    def should_trigger(self, ctx: HookContext) -> bool:
        tool = str(ctx.tool_name)
        return any(lim.covers(tool) for lim in self.limits)

    async def execute(self, ctx: HookContext) -> HookResult:
        try:
            await self.admit(ctx)
        except LimitRefused as exc:
            return HookResult(allow=False, error=f"Refused by session limits: {exc}")
        return _ALLOW

    async def admit(self, ctx: HookContext) -> None:
        """Check the call's preconditions and take its claims; LimitRefused says why not."""
        tool = str(ctx.tool_name)
        covering = [lim for lim in self.limits if lim.covers(tool)]
        for lim in covering:
            if lim.after_approved is not None and not await self.claims.approved(
                    approved_key(_scope(ctx, lim), lim.after_approved),
                    lim.approved_within_s):
                within = ("" if lim.approved_within_s is None
                          else f" within {_window_text(lim.approved_within_s)}")
                raise LimitRefused(f"limit '{lim.name}': '{tool}' runs only after an "
                                   f"approved call of '{lim.after_approved}' in this "
                                   f"session{within}")
        wants = [Want(f"{lim.name}|{lim.window_s}s|{_scope(ctx, lim)}", lim.window_s,
                      lim.count, lim.max_units,
                      0 if lim.sum is None else amount_units(
                          f"limit '{lim.name}': argument {lim.sum}",
                          _argument(ctx.tool_args, lim.sum)))
                 for lim in covering if lim.count is not None or lim.sum is not None]
        if not wants:
            return
        claimed = await self.claims.claim(call_key(ctx), wants)
        counting = [lim for lim in covering if lim.count is not None or lim.sum is not None]
        if claimed.granted:
            # For the policies (context.limits, policies/facts.py): this claim's standing.
            ctx.facts[LIMITS_KEY] = _standing(counting, claimed)
            return
        lim = next(lim for lim, w in zip(counting, wants, strict=True)
                   if w.key == claimed.refused)
        wait = max(1, math.ceil(claimed.retry_after))
        raise LimitRefused(f"limit '{lim.name}' allows {lim.text}, and this call would "
                           f"pass it; retry in {wait} second{'s' if wait != 1 else ''} "
                           "at the earliest")

    async def on_blocked(self, ctx: HookContext, outcome: ToolOutcome) -> None:
        """A call refused after it took its claims gives them back; one waiting for a
        person keeps them."""
        if _WAITING in str(outcome.error or ""):
            return
        if self.should_trigger(ctx) and _has_call_key(ctx):
            await self.claims.release(call_key(ctx))


class SessionLimitsFinal(PreToolUseHook):
    """The same claim again right before the approval gate, and again after a person
    decided: a hook after ``session_limits`` may have rewritten the arguments, or the
    approver edited them, and the claim must hold the amount that will run (the call's
    claim is updated, not doubled; a larger amount that no longer fits is refused)."""

    name = f"{NAME}_final"
    priority = GATE_PRIORITY - 1
    fail_mode = "closed"
    recheck_after_approval = True
    matcher = "calls the session limits cover, with their final arguments"

    def __init__(self, limits: SessionLimits) -> None:
        self.owner = limits

    def should_trigger(self, ctx: HookContext) -> bool:
        return self.owner.should_trigger(ctx)

    async def execute(self, ctx: HookContext) -> HookResult:
        return await self.owner.execute(ctx)


class SessionLimitOutcomes(PostToolUseHook):
    """After a call ran: a failed one gives its claims back, a successful one's are settled
    (never given back); an approved call of a tool other limits wait for is remembered for
    the session."""

    name = f"{NAME}_outcomes"
    priority = SESSION_LIMITS_PRIORITY
    fail_mode = "closed"
    matcher = "calls the session limits cover"

    def __init__(self, limits: SessionLimits) -> None:
        self.owner = limits

    def should_trigger(self, ctx: HookContext) -> bool:
        return (self.owner.should_trigger(ctx) or str(ctx.tool_name) in self.owner.unlocking)

    async def execute(self, ctx: HookContext) -> HookResult:
        tool = str(ctx.tool_name)
        if ctx.tool_error is not None:
            if self.owner.should_trigger(ctx) and _has_call_key(ctx):
                await self.owner.claims.release(call_key(ctx))
            return _ALLOW
        if self.owner.should_trigger(ctx) and _has_call_key(ctx):
            await self.owner.claims.settle(call_key(ctx))
        approval = ctx.approval
        if (tool in self.owner.unlocking and approval is not None
                and approval.status == "approved"):
            session = _session(ctx)
            if session is not None:
                await self.owner.claims.record_approved(
                    approved_key(f"session:{session}", tool),
                    call_key(ctx) if _has_call_key(ctx) else f"{session}|?")
        return _ALLOW


def _standing(limits: Sequence[Limit], claimed: Claimed) -> dict[str, Any]:
    """What the policies see of a granted claim: the limits' names, the tightest count and
    sum among them (used, this call included, and what is left), and each limit's own
    figures under its name (``by_name``)."""
    out: dict[str, Any] = {"names": [lim.name for lim in limits], "by_name": {
        lim.name: _own(lim, s) for lim, s in zip(limits, claimed.standings, strict=True)}}
    counts = [(lim.count - s.count, s.count) for lim, s in zip(limits, claimed.standings,
                                                                strict=True)
              if lim.count is not None]
    sums = [(lim.max_units - s.units, s.units) for lim, s in zip(limits, claimed.standings,
                                                                 strict=True)
            if lim.max_units is not None]
    if counts:
        out["count_remaining"], out["count_used"] = min(counts)
    if sums:
        out["sum_remaining"], out["sum_used"] = min(sums)
    return out


def _own(lim: Limit, standing: Standing) -> dict[str, int]:
    """One limit's figures: calls counted, and as the limit has them, what is left of its
    count, the sum (in whole ten-thousandths) and what is left of its cap."""
    out = {"count_used": standing.count}
    if lim.count is not None:
        out["count_remaining"] = lim.count - standing.count
    if lim.max_units is not None:
        out["sum_used"] = standing.units
        out["sum_remaining"] = lim.max_units - standing.units
    return out


def approved_key(scope: str, tool: str) -> str:
    return f"approved|{scope}|{tool}"


def call_key(ctx: HookContext) -> str:
    """The call's identity in its claims: its run (session) and call id."""
    meta = ctx.metadata
    run, call = meta.get("run_id"), meta.get("tool_call_id")
    if not run or not call:
        raise LimitRefused("the call has no run and call id to hold its claims by")
    return f"{run}|{call}"


def _has_call_key(ctx: HookContext) -> bool:
    return bool(ctx.metadata.get("run_id")) and bool(ctx.metadata.get("tool_call_id"))


def _session(ctx: HookContext) -> str | None:
    meta = ctx.metadata
    found = meta.get("facts_session") or meta.get("root_run_id") or meta.get("run_id")
    return str(found) if found else None


def _scope(ctx: HookContext, lim: Limit) -> str:
    """Who the limit counts for this call: ``per:value``; LimitRefused without one."""
    if lim.per == "user":
        who = ctx.user_id
    elif lim.per == "agent":
        who = ctx.agent_id
    elif lim.per == "org":
        who = ctx.metadata.get("org_id")
    else:
        who = _session(ctx)
    if not who:
        raise LimitRefused(f"limit '{lim.name}' counts per {lim.per}, and the call has no "
                           f"{lim.per}")
    return f"{lim.per}:{who}"


def _argument(args: Mapping[str, Any], path: str) -> Any:
    node: Any = args
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise LimitRefused(f"the call has no argument {path!r} to count")
        node = node[part]
    return node


def _shown(units: int) -> str:
    text = format(Decimal(units) / AMOUNT_SCALE, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _window_text(seconds: int) -> str:
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds % size == 0:
            n = seconds // size
            return unit if n == 1 else f"{n} {unit}s"
    return f"{seconds} seconds"
