"""Session-aware limits are exact under concurrency: trials of 64 concurrent claims, 500
from two OS processes (two engines) on one PostgreSQL database and 1,000 from one process on
SQLite, admit no call past a count or a sum cap and refuse none that was within it."""

from __future__ import annotations

import asyncio
import multiprocessing
import queue
from typing import Any

import pytest

from hookgate.storage.database import Database
from hookgate.storage.session_limits import LimitClaims, Standing, Want
from tests.limits.trials import CALLS, TWO_PROCESS_TRIALS, check, fire, plan, run_process


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
@pytest.mark.timeout(600)  # 32,000 claims, each its own transaction; ~35 s on a quiet machine
def test_two_processes_on_postgresql_admit_exactly(database_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    out = ctx.Queue()
    procs = [ctx.Process(target=run_process,
                         args=(database_url, 46, part, 2, barrier, out, TWO_PROCESS_TRIALS))
             for part in range(2)]
    for p in procs:
        p.start()
    shares = _shares(out, procs)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    trials = plan(46, TWO_PROCESS_TRIALS)
    assert len(trials) == TWO_PROCESS_TRIALS == len(shares[0]) == len(shares[1])
    # Every pair of caps the plan draws from (7 counts × 5 sums) is tried.
    assert len({(trial.max_count, trial.max_units) for trial in trials}) == 35
    refused = 0
    for n, trial in enumerate(trials):
        answers = shares[0][n] + shares[1][n]
        check(trial, answers)
        refused += sum(1 for _, c in answers if not c.granted)
    assert refused > 0  # the caps bound


def _shares(out: Any, procs: list[Any]) -> dict[int, Any]:
    """Each process's answers, as each puts them; a process that died fails the test at once
    (its traceback is in the output) instead of leaving the test waiting for its share."""
    shares: dict[int, Any] = {}
    while len(shares) < len(procs):
        try:
            part, answers = out.get(timeout=1.0)
        except queue.Empty:
            died = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            assert not died, f"a trial process exited with {died} before giving its answers"
            continue
        shares[part] = answers
    return shares


async def test_one_process_on_sqlite_admits_exactly(db: Database) -> None:
    assert db.backend.dialect == "sqlite"
    refused = 0
    for trial in plan(7):
        answers = await fire(db, trial, range(CALLS), 1_000.0)
        check(trial, answers)
        refused += sum(1 for _, c in answers if not c.granted)
    assert refused > 0


@pytest.mark.both_databases
async def test_window_slides_and_release_gives_back(db: Database) -> None:
    claims = LimitClaims(db)
    cap = Want("user:ann|transfers", 3600.0, None, 5_000 * 10_000, 2_000 * 10_000)
    got = [await claims.claim(f"c{i}", [cap], now=100.0 + i) for i in range(3)]
    assert [c.granted for c in got] == [True, True, False]
    assert got[2].refused == "user:ann|transfers"
    assert got[2].retry_after == pytest.approx(3600.0 - 2)
    # The same call asked again takes no second claim.
    again = await claims.claim("c1", [cap], now=103.0)
    assert again.granted and again.standings[0].units == 4_000 * 10_000
    assert await claims.release("c1") == 1
    assert (await claims.claim("c3", [cap], now=104.0)).granted
    # An hour after the first claim it has left the window; the others have not.
    assert not (await claims.claim("c4", [cap], now=100.0 + 3599.0)).granted
    assert (await claims.claim("c5", [cap], now=100.0 + 3600.0)).granted


@pytest.mark.both_databases
async def test_all_or_nothing_over_several_limits(db: Database) -> None:
    claims = LimitClaims(db)
    per_session = Want("session:s|deletes", 60.0, 2)
    per_user = Want("user:ann|deletes", 60.0, 1)
    assert (await claims.claim("a", [per_session, per_user], now=1.0)).granted
    refused = await claims.claim("b", [per_session, per_user], now=2.0)
    assert not refused.granted and refused.refused == "user:ann|deletes"
    # "b" took nothing on the session's limit either.
    one = await claims.claim("c", [per_session], now=3.0)
    assert one.granted and one.standings[0].count == 2


async def test_concurrent_claims_on_two_keys_never_deadlock(db: Database) -> None:
    claims = LimitClaims(db)
    a, b = Want("a", 60.0, 100), Want("b", 60.0, 100)
    answers = await asyncio.gather(*(
        claims.claim(f"c{i}", [a, b] if i % 2 else [b, a], now=1.0) for i in range(40)))
    assert all(c.granted for c in answers)


@pytest.mark.both_databases
async def test_a_call_claimed_again_with_another_amount_holds_the_new_one(
        db: Database) -> None:
    claims = LimitClaims(db)

    def cap(units: int) -> Want:
        return Want("user:ann|pay", 3600.0, None, 5_000, units)
    assert (await claims.claim("a", [cap(2_000)], now=1.0)).granted
    assert (await claims.claim("b", [cap(2_000)], now=2.0)).granted
    # "a" rewritten to 4,000 after its first claim: 4,000 + 2,000 no longer fits.
    grown = await claims.claim("a", [cap(4_000)], now=3.0)
    assert not grown.granted and grown.standings[-1].units == 6_000
    # Smaller: fits, and is what counts from now on (one claim, not two).
    shrunk = await claims.claim("a", [cap(500)], now=4.0)
    assert shrunk.granted and shrunk.standings[0] == Standing("user:ann|pay", 2, 2_500)
    assert (await claims.claim("c", [cap(2_500)], now=5.0)).granted
    assert not (await claims.claim("d", [cap(1)], now=6.0)).granted


@pytest.mark.both_databases
async def test_a_settled_claim_is_never_given_back(db: Database) -> None:
    claims = LimitClaims(db)
    one = Want("session:s|deletes", 60.0, 1)
    assert (await claims.claim("ran", [one], now=1.0)).granted
    await claims.settle("ran")
    assert await claims.release("ran") == 0
    assert not (await claims.claim("next", [one], now=2.0)).granted
    assert (await claims.claim("later", [one], now=61.0)).granted  # it left the window
