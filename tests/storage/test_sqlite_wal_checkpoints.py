"""A SQLite file's write-ahead log is checkpointed on a thread of its own (decision record 0043):
no writer copies the log as it commits, yet the log stays bounded under writes that never
pause, a checkpoint that fails or is held off loses nothing and is tried again, and the
commits SQLAlchemy makes count as the driver's do."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import text

from hookgate.storage.backends import sqlite_checkpoint
from hookgate.storage.backends.sqlite_checkpoint import SAFETY_NET_PAGES, WalCheckpointer
from hookgate.storage.backends.sqlite_driver import SqliteDriver
from hookgate.storage.database import Database

#: Bytes per page in the log: a 4 KB page and its 24-byte frame header.
FRAME = 4096 + 24


def _wal_bytes(driver: SqliteDriver) -> int:
    return Path(driver.path + "-wal").stat().st_size


async def _settled(checkpointer: WalCheckpointer) -> None:
    """Until no checkpoint is running (one started by the last commit included)."""
    for _ in range(500):
        if not checkpointer._running:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("a checkpoint is still running after 5 s")


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """A first pass after 20 commits, a pass per 80 pages after it, the log started again
    past 300 pages."""
    monkeypatch.setattr(sqlite_checkpoint, "FIRST_PASS_COMMITS", 20)
    monkeypatch.setattr(sqlite_checkpoint, "PAGES_PER_PASS", 80)
    monkeypatch.setattr(sqlite_checkpoint, "RESTART_PAGES", 300)


async def _driver(db: Database) -> SqliteDriver:
    driver = db.backend.driver
    assert isinstance(driver, SqliteDriver)
    await driver.write(lambda c: c.execute("CREATE TABLE w (k INTEGER PRIMARY KEY, v TEXT)"))
    return driver


@pytest.mark.usefixtures("small")
async def test_writes_that_never_pause_leave_the_log_bounded(db: Database) -> None:
    driver = await _driver(db)
    # 40,000 commits of a 1 KB row each, back to back on the caller's thread: each appends
    # at least one 4 KB page, about 165 MB of log if nothing started it again.
    commits = 40_000
    for k in range(commits):
        await driver.write(lambda c, k=k: c.execute("INSERT INTO w VALUES (?, ?)",
                                                  (k, "x" * 1000)))
    await _settled(driver.checkpointer)
    size = await asyncio.to_thread(_wal_bytes, driver)
    assert driver.checkpointer.restarts >= 3, vars(driver.checkpointer)
    # The log reaches the restart threshold plus what writers append while a checkpoint
    # runs: at this rate (about 30,000 commits a second) a few thousand pages, more while
    # an fsync is slow; far from every page.
    assert size < commits * FRAME / 2, size
    assert await driver.read(lambda c: c.execute("SELECT count(*) FROM w").fetchone()) == (
        commits,)


async def test_no_connection_of_the_file_checkpoints_as_it_commits(db: Database) -> None:
    # The driver's connections (the caller's thread, the driver's thread) and SQLAlchemy's
    # leave the log to the checkpointer, up to the safety net.
    driver = await _driver(db)
    here = await driver.read(lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
    queued = await driver.write(lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
    driver_thread = await asyncio.get_running_loop().run_in_executor(
        driver._executor, lambda: driver._conn.execute(  # type: ignore[union-attr]
            "PRAGMA wal_autocheckpoint").fetchone()[0] if driver._conn else None)
    async with db.session() as s:
        engine = (await s.execute(text("PRAGMA wal_autocheckpoint"))).scalar_one()
    assert here == queued == engine == SAFETY_NET_PAGES
    assert driver_thread in (None, SAFETY_NET_PAGES)


@pytest.mark.usefixtures("small")
async def test_the_checkpoint_runs_on_its_own_thread(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    driver = await _driver(db)
    threads: list[str] = []
    run = WalCheckpointer._run

    def seen(self: WalCheckpointer, conn: sqlite3.Connection) -> None:
        threads.append(threading.current_thread().name)
        run(self, conn)

    monkeypatch.setattr(WalCheckpointer, "_run", seen)
    for k in range(60):
        await driver.write(lambda c, k=k: c.execute("INSERT INTO w VALUES (?, 'v')", (k,)))
    await _settled(driver.checkpointer)
    assert threads and all(t.startswith("hookgate-sqlite-wal") for t in threads), threads
    assert driver.checkpointer.passes == len(threads)


@pytest.mark.usefixtures("small")
async def test_sqlalchemys_commits_count_toward_a_checkpoint(db: Database) -> None:
    driver = await _driver(db)  # the driver's one commit: far from the first pass's 20
    for k in range(30):
        async with db.session() as s, s.begin():
            await s.execute(text("INSERT INTO w VALUES (:k, 'v')"), {"k": k})
    await _settled(driver.checkpointer)
    assert driver.checkpointer.passes >= 1, vars(driver.checkpointer)


@pytest.mark.usefixtures("small")
async def test_the_commits_between_passes_follow_the_pages_each_commit_writes(
        db: Database) -> None:
    # A commit says nothing of its pages: each pass sets the commits until the next from
    # the pages per commit since the pass before, so a bulk write (many pages a commit)
    # brings the passes closer, in commits, and small writes spread them out again.
    driver = await _driver(db)
    checkpointer = driver.checkpointer
    for k in range(120):  # about ten pages a commit
        await driver.write(lambda c, k=k: c.execute("INSERT INTO w VALUES (?, ?)",
                                                  (k, "b" * 40_000)))
        await _settled(checkpointer)
    bulk = checkpointer.every
    assert bulk is not None and bulk <= 12, vars(checkpointer)
    for k in range(120, 1000):  # one page a commit
        await driver.write(lambda c, k=k: c.execute("INSERT INTO w VALUES (?, 'v')", (k,)))
        await _settled(checkpointer)
    assert checkpointer.every is not None and checkpointer.every >= 4 * bulk, vars(checkpointer)


@pytest.mark.usefixtures("small")
async def test_a_failed_checkpoint_is_logged_loses_nothing_and_is_tried_again(
        db: Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    driver = await _driver(db)
    failures = iter([sqlite3.OperationalError("disk I/O error")])
    run = WalCheckpointer._run

    def failing_once(self: WalCheckpointer, conn: sqlite3.Connection) -> None:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        run(self, conn)

    monkeypatch.setattr(WalCheckpointer, "_run", failing_once)
    caplog.set_level(logging.WARNING, logger=sqlite_checkpoint.__name__)
    for k in range(20):
        await driver.write(lambda c, k=k: c.execute("INSERT INTO w VALUES (?, 'v')", (k,)))
    await _settled(driver.checkpointer)
    assert "checkpointing the write-ahead log" in caplog.text
    assert "disk I/O error" in caplog.text
    assert driver.checkpointer.passes == 0
    for k in range(20, 40):
        await driver.write(lambda c, k=k: c.execute("INSERT INTO w VALUES (?, 'v')", (k,)))
    await _settled(driver.checkpointer)
    assert driver.checkpointer.passes == 1
    assert await driver.read(lambda c: c.execute("SELECT count(*) FROM w").fetchone()) == (40,)


@pytest.mark.usefixtures("small")
async def test_a_pass_that_starts_late_paces_the_next_from_the_commits_it_saw(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    # Under load the checkpointer's thread may start a pass long after the commit that
    # asked for it. The pass reads the log then, so it counts the commits up to then: with
    # the commits counted when it was asked for, the next pass saw a page or two appended
    # over all the commits made while the late one waited, and set the passes up to
    # MAX_COMMITS apart (CI saw the log grow past every pass of a test that way).
    driver = await _driver(db)
    checkpointer = driver.checkpointer
    await _settled(checkpointer)
    started, go = threading.Event(), threading.Event()
    run = WalCheckpointer._run

    def late(self: WalCheckpointer, conn: sqlite3.Connection) -> None:
        if not started.is_set():
            started.set()
            go.wait(30)  # the pass is held back, the writers go on
        run(self, conn)

    monkeypatch.setattr(WalCheckpointer, "_run", late)
    k = 0
    while not started.is_set() and k < 500:
        await driver.write(lambda c, k=k: c.execute("INSERT INTO w VALUES (?, ?)",
                                                  (k, "p" * 3000)))
        k += 1
        await asyncio.sleep(0)
    assert started.is_set(), vars(checkpointer)
    for j in range(k, k + 150):  # about a page a commit, while the pass waits
        await driver.write(lambda c, j=j: c.execute("INSERT INTO w VALUES (?, ?)",
                                                  (j, "p" * 3000)))
    go.set()
    await _settled(checkpointer)
    passes = checkpointer.passes
    j = k + 150
    while checkpointer.passes < passes + 2 and j < k + 2000:
        await driver.write(lambda c, j=j: c.execute("INSERT INTO w VALUES (?, ?)",
                                                  (j, "p" * 3000)))
        j += 1
        await _settled(checkpointer)
    assert checkpointer.passes >= passes + 2, vars(checkpointer)
    # About a page a commit: a pass about every 80 commits (PAGES_PER_PASS here), not 2,000.
    every = checkpointer.every
    assert every is not None and every <= 160, vars(checkpointer)


@pytest.mark.usefixtures("small")
async def test_a_reader_in_the_log_holds_off_its_restart_without_holding_up_writers(
        db: Database) -> None:
    # A reader that stays in its snapshot keeps the passes from copying the whole log: no
    # restart is tried (it would hold every writer until the reader ends), the writers go
    # on, on the caller's thread, and the log keeps every page; once the reader ends, the
    # next checkpoint starts the log again.
    driver = await _driver(db)
    await driver.write(lambda c: c.execute("INSERT INTO w VALUES (-1, 'first')"))
    reader = sqlite3.connect(driver.path, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM w").fetchone() == (1,)
    here = threading.get_ident()
    try:
        for k in range(1200):
            where = await driver.write(lambda c, k=k: (c.execute(
                "INSERT INTO w VALUES (?, ?)", (k, "x" * 1000)), threading.get_ident())[1])
            assert where == here, "a writer was sent off the caller's thread"
        await _settled(driver.checkpointer)
        assert driver.checkpointer.restarts == 0
        assert driver.checkpointer.held_off >= 1, vars(driver.checkpointer)
        held = await asyncio.to_thread(_wal_bytes, driver)
        assert held > 1200 * FRAME  # nothing could start the log again: it kept every page
    finally:
        reader.execute("ROLLBACK")
        reader.close()
    k = 1200  # writes go on until the next pass (its pace is set by the passes before)
    while driver.checkpointer.restarts == 0 and k < 5000:
        await driver.write(lambda c, k=k: c.execute("INSERT INTO w VALUES (?, 'v')", (k,)))
        k += 1
        await _settled(driver.checkpointer)
    assert driver.checkpointer.restarts >= 1, vars(driver.checkpointer)
    # Started again: the next writes go to the log's beginning, so its file stops growing.
    before = await asyncio.to_thread(_wal_bytes, driver)
    for n in range(k, k + 30):
        await driver.write(lambda c, n=n: c.execute("INSERT INTO w VALUES (?, 'v')", (n,)))
    assert await asyncio.to_thread(_wal_bytes, driver) == before
    assert await driver.read(lambda c: c.execute("SELECT count(*) FROM w").fetchone()) == (
        k + 30 + 1,)


async def test_a_restart_that_cannot_take_the_lock_in_time_gives_up_and_says_so(
        db: Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Another connection (another process) holds the write lock past the restart's wait:
    # the restart gives up, says so, and lets this process's writers go again.
    monkeypatch.setattr(sqlite_checkpoint, "FIRST_PASS_COMMITS", 10**9)  # started by hand
    monkeypatch.setattr(sqlite_checkpoint, "RESTART_PAGES", 100)
    monkeypatch.setattr(sqlite_checkpoint, "RESTART_WAIT_MS", 50)
    caplog.set_level(logging.INFO, logger=sqlite_checkpoint.__name__)
    driver = await _driver(db)
    for k in range(200):
        await driver.write(lambda c, k=k: c.execute("INSERT INTO w VALUES (?, ?)",
                                                  (k, "x" * 1000)))
    holder = sqlite3.connect(driver.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        checkpointer = driver.checkpointer
        checkpointer._running = True
        await asyncio.to_thread(checkpointer._checkpoint)
        assert checkpointer.restarts == 1
        assert "could not be started again within 50 ms" in caplog.text
        assert not checkpointer.restart_due and checkpointer.restarted.is_set()
        assert not checkpointer._running
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    where = await driver.write(lambda c: (c.execute("INSERT INTO w VALUES (1000, 'after')"),
                                          threading.get_ident())[1])
    assert where == threading.get_ident()  # on the caller's thread again


async def test_a_closed_driver_starts_no_checkpoint(db: Database) -> None:
    driver = await _driver(db)
    driver.checkpointer.close()
    for _ in range(sqlite_checkpoint.FIRST_PASS_COMMITS + 1):
        driver.checkpointer.committed()
    assert driver.checkpointer.passes == 0
    assert driver.checkpointer._executor is None


CHILD_WRITER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("PRAGMA busy_timeout=30000")
print("ready", flush=True)
for k in range(int(sys.argv[2]), int(sys.argv[3])):
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO w VALUES (?, ?)", (k, "c" * 1000))
    conn.execute("COMMIT")
    if k % 50 == 0:
        print(k, flush=True)
    time.sleep(0.0005)  # a writer that pauses, as the CLI does: SQLite's lock is not fair
"""


@pytest.mark.usefixtures("small")
async def test_another_process_writing_and_killed_meanwhile_loses_nothing(
        db: Database, tmp_path: Path) -> None:
    # A second process writes the same file (as the CLI or another instance does), with
    # SQLite's own checkpoints, while this process's checkpointer passes and restarts; it
    # is killed (SIGKILL) in the middle of its writes. Every committed row of both is
    # there, the file is sound, and this process's log is still started again.
    driver = await _driver(db)
    script = tmp_path / "writer.py"
    script.write_text(CHILD_WRITER)
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(script), driver.path, "100000", "200000",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert child.stdout is not None
    assert (await asyncio.wait_for(child.stdout.readline(), 30)).strip() == b"ready"
    mine = 0
    try:
        seen = 0
        while seen < 600:  # both write until the child has committed 600 rows or more
            for _ in range(20):
                await driver.write(lambda c, k=mine: c.execute(
                    "INSERT INTO w VALUES (?, ?)", (k, "x" * 1000)))
                mine += 1
            line = await asyncio.wait_for(child.stdout.readline(), 30)
            if not line:
                assert child.stderr is not None
                raise AssertionError(f"the writer stopped: {await child.stderr.read()!r}")
            seen = int(line) - 100000
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have stopped on its own
            child.kill()  # SIGKILL: mid-transaction, perhaps mid-checkpoint
        await child.wait()
    restarts = driver.checkpointer.restarts
    while driver.checkpointer.restarts == restarts and mine < 20_000:  # on to the next restart
        await driver.write(lambda c, k=mine: c.execute(
            "INSERT INTO w VALUES (?, ?)", (k, "x" * 1000)))
        mine += 1
        await _settled(driver.checkpointer)

    def check(c: sqlite3.Connection) -> tuple[str, int, int, int]:
        ok = c.execute("PRAGMA integrity_check").fetchone()[0]
        own = c.execute("SELECT count(*) FROM w WHERE k < 100000").fetchone()[0]
        theirs, top = c.execute(
            "SELECT count(*), max(k) FROM w WHERE k >= 100000").fetchone()
        return ok, own, theirs, top

    ok, own, theirs, top = await driver.read(check)
    assert ok == "ok"
    assert own == mine
    # The child's rows are every row up to its last commit: none lost, none half-written.
    assert theirs == top - 100000 + 1 and theirs >= 600
    assert driver.checkpointer.restarts > restarts, vars(driver.checkpointer)


async def test_a_checkpoint_that_cannot_start_never_fails_the_write_that_asked(
        db: Database) -> None:
    # At interpreter exit no new thread can start (submit raises RuntimeError): a write
    # whose commit is done must still be reported done, and no checkpoint is left pending.
    driver = await _driver(db)
    checkpointer = driver.checkpointer
    stopped = ThreadPoolExecutor(1)
    stopped.shutdown()
    checkpointer._executor = stopped
    checkpointer.every = 1
    await driver.write(lambda c: c.execute("INSERT INTO w VALUES (1, 'stored')"))
    assert not checkpointer._running and checkpointer.passes == 0
    assert await driver.read(lambda c: c.execute("SELECT v FROM w").fetchone()) == ("stored",)
