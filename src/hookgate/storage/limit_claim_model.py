"""What a claim on session-aware limits is and how one is decided from a window's use: the
values the claim owner (storage/session_limits.py) and the backends that run its
transaction (storage/backends/limit_claims.py) share, free of any database."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Amounts are kept as integers in units of 1/AMOUNT_SCALE (four decimal places, as Cedar's
#: decimal holds them).
AMOUNT_SCALE = 10_000
#: The largest amount (in units) one claim or one window's sum may reach: Cedar's decimal
#: range, well inside a 64-bit column.
MAX_UNITS = 9_223_372_036_854_775_807 // 1024
#: Row kinds: a claim of a call in flight (given back if it is refused or fails), one of a
#: call that ran (``done``: counted until it leaves its window, never given back), and a
#: session's approved call of a tool.
CLAIM, DONE, APPROVED = "claim", "done", "approved"


@dataclass(frozen=True, slots=True)
class Want:
    """One limit a call falls under: its key, sliding window, caps and this call's amount."""

    key: str
    window_s: float
    max_count: int | None = None
    #: Cap on the window's sum, in units.
    max_units: int | None = None
    #: This call's amount, in units (0 for a count-only limit).
    units: int = 0


@dataclass(frozen=True, slots=True)
class Standing:
    """A limit's use in its window, this call's claim included when it was granted."""

    key: str
    count: int
    units: int


@dataclass(frozen=True, slots=True)
class Claimed:
    """The answer to a claim: granted for every limit, or refused by ``refused`` (then the
    last standing is that limit's as it would have been with this call)."""

    granted: bool
    standings: tuple[Standing, ...]
    refused: str | None = None
    #: Seconds until the oldest claim of the refusing limit leaves its window.
    retry_after: float = 0.0


def decide(call_key: str, wants: Sequence[Want], rows: Sequence[tuple[Any, ...]],
           now: float) -> tuple[Claimed, list[Want], list[Want]]:
    """The answer for ``wants`` given each one's (count, sum, claims of this call, oldest
    claim's time, this call's amount) in its window; the claims to insert and the ones of
    this call whose amount changes (its arguments were rewritten or edited since its first
    claim), none when refused."""
    standings: list[Standing] = []
    inserts: list[Want] = []
    updates: list[Want] = []
    for want, (count, units, mine, oldest, my_units) in zip(wants, rows, strict=True):
        count, units = int(count), int(units)
        if int(mine) == 0:
            count, units = count + 1, units + want.units
            grows = True
        else:
            units += want.units - int(my_units)
            grows = want.units > int(my_units)
        if grows and ((want.max_count is not None and count > want.max_count)
                      or (want.max_units is not None and units > want.max_units)
                      or units > MAX_UNITS):
            wait = 0.0 if oldest is None else float(oldest) + want.window_s - now
            return Claimed(False, (*standings, Standing(want.key, count, units)),
                           want.key, max(0.0, wait)), [], []
        if int(mine) == 0:
            inserts.append(want)
        elif want.units != int(my_units):
            updates.append(want)
        standings.append(Standing(want.key, count, units))
    return Claimed(True, tuple(standings)), inserts, updates
