"""`connector_rate_limit`: at most N calls per window to a connector, per user or per org.

    {name: connector_rate_limit,
     params: {limits: {oa: "10/minute", crm: "100/hour"}, per: user, redis_url: null}}

Counters are fixed windows aligned to the epoch (``storage/rate_limits.py``), kept in the
database — or in Redis with ``redis_url`` — so every process shares them, and each slot is
taken in one atomic statement: 100 concurrent calls against a limit of 10 let exactly 10
through. A refused call is told in how many seconds the window turns. A call asked again
after a person decided it (the guarded-call API re-runs its PreToolUse chain then) carries
``COUNTED_KEY``: its slot was taken at its first ask, so it takes none again.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookgate.catalog.builtin.params import reject_unknown_params, require_database
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext, HookResult, PreToolUseHook
from hookgate.storage.rate_limits import DatabaseRateCounter, RateCounter, RedisRateCounter

#: Late, so calls that another policy blocks use no slot; before the approval gate, so a
#: person is never asked about a call the limit would refuse.
RATE_LIMIT_PRIORITY = 900_000
_PARAMS = ("limits", "per", "redis_url")
_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60,
          "h": 3600, "hour": 3600, "d": 86400, "day": 86400}
_LIMIT = re.compile(r"\s*(\d+)\s*/\s*(\d*)\s*([a-z]+?)s?\s*", re.IGNORECASE)
_ALLOW = HookResult()
#: Metadata set by the path that asks about one call again after a person decided it: the
#: call took its slots at its first ask (which reached the approval gate, after this hook).
COUNTED_KEY = "rate_limits_counted"


@dataclass(frozen=True, slots=True)
class Limit:
    """``count`` calls per ``window_s`` seconds, as declared (``text``)."""

    count: int
    window_s: int
    text: str

    @classmethod
    def parse(cls, connector: str, text: object) -> Limit:
        match = _LIMIT.fullmatch(text) if isinstance(text, str) else None
        unit = _UNITS.get(match.group(3).lower()) if match else None
        if match is None or unit is None or not isinstance(text, str):
            raise HookBuildError(
                f"limits.{connector}: {text!r} is not a rate such as '10/minute', "
                "'100/hour' or '5/30s' (units: second, minute, hour, day)")
        count, multiple = int(match.group(1)), int(match.group(2) or 1)
        if count < 1 or multiple < 1:
            raise HookBuildError(f"limits.{connector}: {text!r} must allow at least one call "
                                 "per window of at least one unit")
        return cls(count, multiple * unit, text.strip())


class ConnectorRateLimit(PreToolUseHook):
    """Refuses a call once its connector's limit for the caller (``per: user``, default)
    or the caller's org (``per: org``) is used up in the current window."""

    #: It keeps nothing per call (its counts are in the database or Redis; a Redis client is
    #: kept per event loop by the counter's class) and its from_declaration reads only its
    #: params and the database: one instance serves every call
    #: (catalog.build.shared_between_calls).
    shared_between_calls = True

    name = "connector_rate_limit"
    priority = RATE_LIMIT_PRIORITY
    fail_mode = "closed"

    def __init__(self, limits: Mapping[str, Limit], counter: RateCounter,
                 per: str = "user") -> None:
        if per not in ("user", "org"):
            raise HookBuildError(f"per must be 'user' or 'org', got {per!r}")
        self.limits = dict(limits)
        self.counter = counter
        self.per = per

    @classmethod
    def from_declaration(cls, params: dict[str, Any], env: Any) -> ConnectorRateLimit:
        reject_unknown_params("connector_rate_limit", params, _PARAMS)
        raw = params.get("limits")
        if not isinstance(raw, Mapping) or not raw:
            raise HookBuildError(
                "limits must map connectors to rates, e.g. {oa: '10/minute'}; got "
                f"{raw!r}")
        limits = {str(c): Limit.parse(str(c), text) for c, text in raw.items()}
        redis_url = params.get("redis_url")
        counter: RateCounter
        if redis_url is not None:
            if not isinstance(redis_url, str) or not redis_url:
                raise HookBuildError(f"redis_url must be a URL, got {redis_url!r}")
            counter = RedisRateCounter(redis_url)
        else:
            counter = DatabaseRateCounter(
                require_database("connector_rate_limit", env, "its counters"))
        return cls(limits, counter, per=params.get("per", "user"))

    @property
    def matcher(self) -> str:
        """What `hookgate check` shows: the connectors and their limits."""
        rates = ", ".join(f"{c} {limit.text}" for c, limit in self.limits.items())
        return f"{rates} per {self.per}"

    def should_trigger(self, ctx: HookContext) -> bool:
        return (ctx.metadata.get("connector") in self.limits
                and ctx.metadata.get(COUNTED_KEY) is not True)

    async def execute(self, ctx: HookContext) -> HookResult:
        connector = ctx.metadata["connector"]
        limit = self.limits[connector]
        who = ctx.user_id if self.per == "user" else ctx.metadata.get("org_id")
        key = f"{connector}|{limit.window_s}s|{self.per}:{who or ''}"
        slot = await self.counter.take(key, limit.count, limit.window_s, time.time())
        if slot.allowed:
            return _ALLOW
        return HookResult(allow=False, error=self.refusal(connector, limit, who,
                                                          slot.retry_after))

    def refusal(self, connector: str, limit: Limit, who: str | None,
                retry_after: float) -> str:
        seconds = max(1, math.ceil(retry_after))
        caller = f"{self.per} '{who}'" if who else f"calls without a {self.per}"
        return (f"Rate limit reached: connector '{connector}' allows {limit.text} per "
                f"{self.per}, and {caller} used them all. Retry in {seconds} "
                f"second{'s' if seconds != 1 else ''}.")
