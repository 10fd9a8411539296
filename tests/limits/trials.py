"""Trials of concurrent claims straight at the claim owner (storage/session_limits.py): the
plan every process derives from one seed, the claims one process fires, and the check that
what was granted and refused is what some serial order of the same claims gives."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

from hookgate.storage.database import Database
from hookgate.storage.session_limits import Claimed, LimitClaims, Want

TRIALS = 1_000
#: The two-process trial on PostgreSQL: 500 trials (32,000 claims) take half of the suite's
#: costliest test (about 200 CPU-s between its two processes and the server at 1,000) and
#: still try each of the plan's 35 pairs of caps 7 times or more.
TWO_PROCESS_TRIALS = 500
CALLS = 64
#: Trials run at once (each on its own key), so the thousand take tens of seconds.
BATCH = 8
WINDOW_S = 3600.0


@dataclass(frozen=True, slots=True)
class Trial:
    key: str
    max_count: int
    max_units: int
    amounts: tuple[int, ...]


def plan(seed: int, trials: int = TRIALS, calls: int = CALLS) -> list[Trial]:
    """Caps that bind in most trials: some by count, some by sum, some not at all."""
    rng = random.Random(seed)
    out = []
    for i in range(trials):
        amounts = tuple(rng.choice((0, 1, 2_000, 2_000, 5_000, rng.randrange(1, 9_000)))
                        * 10_000 for _ in range(calls))
        max_count = rng.choice((1, 5, 20, 32, 63, 64, 100))
        max_units = rng.choice((0, 5_000, 20_000, 100_000, 10**7)) * 10_000
        out.append(Trial(f"trial-{seed}-{i}", max_count, max_units, amounts))
    return out


def want(trial: Trial, index: int) -> Want:
    return Want(trial.key, WINDOW_S, trial.max_count, trial.max_units, trial.amounts[index])


async def fire(db: Database, trial: Trial, indices: range, now: float
               ) -> list[tuple[int, Claimed]]:
    """The claims of ``indices`` of ``trial``, all at once."""
    claims = LimitClaims(db)

    async def one(i: int) -> tuple[int, Claimed]:
        return i, await claims.claim(f"{trial.key}|call-{i}", [want(trial, i)], now=now)
    return list(await asyncio.gather(*(one(i) for i in indices)))


def check(trial: Trial, answers: list[tuple[int, Claimed]]) -> None:
    """Granted claims form one serial order (counts 1..g, sums their running totals) within
    both caps; each refused one is refused in that order's state at some point, that is:
    it would have passed one cap or the other, then the state it saw was a real one."""
    granted = sorted(((c.standings[-1], i) for i, c in answers if c.granted),
                     key=lambda s: s[0].count)
    prefix = [0]
    for n, (standing, i) in enumerate(granted, start=1):
        assert standing.count == n, (trial, standing)
        assert standing.units == prefix[-1] + trial.amounts[i], (trial, standing)
        prefix.append(standing.units)
    assert len(granted) <= trial.max_count, trial
    assert prefix[-1] <= trial.max_units, trial
    for i, claimed in answers:
        if claimed.granted:
            continue
        seen = claimed.standings[-1]
        before = seen.count - 1
        assert 0 <= before <= len(granted), (trial, seen)
        assert seen.units == prefix[before] + trial.amounts[i], (trial, i, seen)
        assert seen.count > trial.max_count or seen.units > trial.max_units, (trial, i, seen)
    assert len(answers) == len(trial.amounts)


def run_process(url: str, seed: int, part: int, parts: int, barrier: Any, out: Any,
                trials: int = TRIALS) -> None:
    """One OS process's share of every one of the first ``trials`` trials (calls ``part``,
    ``part + parts``, …), each trial started together with the other processes at
    ``barrier``."""
    async def main() -> None:
        db = Database(url)
        results: list[list[tuple[int, Claimed]]] = []
        try:
            planned = plan(seed, trials)
            for first in range(0, len(planned), BATCH):
                await asyncio.to_thread(barrier.wait, 60)
                results.extend(await asyncio.gather(*(
                    fire(db, trial, range(part, CALLS, parts), 1_000.0)
                    for trial in planned[first:first + BATCH])))
        finally:
            await db.dispose()
        out.put((part, results))
    asyncio.run(main())
