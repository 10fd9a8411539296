"""The write-ahead log of a SQLite file checkpointed on a thread of its own, off the writers'
path (decision record 0043).

SQLite checkpoints a WAL by itself in the commit that takes it past 1,000 pages: that writer
copies the pages into the database file and fsyncs both files before its commit returns
(5–8 ms on the development machine). One in-process guarded call in about fifty paid it,
and it was their p99. Here the driver's connections do not checkpoint as they commit
(``wal_autocheckpoint`` is ``SAFETY_NET_PAGES``, a bound a working checkpointer keeps the
log well under); every so many commits of the file (the driver's and SQLAlchemy's in this
process; about ``PAGES_PER_PASS`` pages' worth) start this checkpointer, which:

1. runs a ``PASSIVE`` checkpoint: it copies the log into the database file and fsyncs while
   writers go on appending (it takes no write lock);
2. once the log holds ``RESTART_PAGES`` or more and the pass copied all it found (else a
   reader is still in an older part of the log, and a restart would hold every writer until
   that reader ends), runs a ``RESTART`` checkpoint: it takes the write lock, copies what was
   appended during the pass, fsyncs, and waits for the readers still in the log (at most
   ``RESTART_WAIT_MS`` in all), so that the next writer starts the log again from its
   beginning. Writers wait for that step alone, once per ``RESTART_PAGES`` pages, on the
   driver's thread: an event loop never waits.

The second step is what keeps the log bounded. A passive pass reports the log as it found
it, and writes that overlap the pass are not copied by it: the log is started again only
once a checkpoint has copied all of it, so passive passes alone, under writes that never
pause, let it grow without bound (in a probe, to the 40 MB of its safety net). And writers
that never pause would starve a restart waiting for the lock, so while one is due they queue
on the driver's thread, which waits for it (``restart_due``, ``wait_for_restart``). A failed
checkpoint (an I/O error, a lock held past the wait) is logged and tried again at the next
start: it loses nothing (the pages stay in the log), and each writer's commit still reports
its own failure.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger(__name__)

#: Pages to append to the log between two passes. The checkpointer counts commits, not pages
#: (a commit says nothing of its pages), so each pass sets the commits until the next from
#: the pages per commit it found since the pass before (4–5 on the hot paths; a bulk write
#: far more), within ``MIN_COMMITS`` and ``MAX_COMMITS``.
PAGES_PER_PASS = 1_800
#: Commits before the first pass, while nothing is known of their pages.
FIRST_PASS_COMMITS = 50
MIN_COMMITS = 8
MAX_COMMITS = 2_000
#: Pages in the log (4 KB each) past which the checkpointer takes the write lock to start
#: it again. At 1,000 one writer in about fifty waited for that step, at 4,000 one in about
#: two hundred (the in-process guarded call's p99: 5.0–5.3 ms against 1.7–2.0 ms).
RESTART_PAGES = 4_000
#: The most the ``RESTART`` step waits for the writer and the readers in its way (writers
#: of this process wait as long).
RESTART_WAIT_MS = 200
#: ``wal_autocheckpoint`` of the driver's connections: a bound that holds even if this
#: checkpointer cannot run (SQLite's own checkpoint in the committing writer).
SAFETY_NET_PAGES = 10_000

__all__ = ["FIRST_PASS_COMMITS", "MAX_COMMITS", "MIN_COMMITS", "PAGES_PER_PASS",
           "RESTART_PAGES", "RESTART_WAIT_MS", "SAFETY_NET_PAGES", "WalCheckpointer"]


class WalCheckpointer:
    """Checkpoints one SQLite file's WAL on its own thread, one checkpoint at a time."""

    def __init__(self, path: str) -> None:
        self.path = path
        #: Commits since the last pass was started (what starts the next one).
        self._commits = 0
        #: Commits of the file in this process, and their count when the last pass read
        #: the log: the commits a pass sets its pace from are those up to the moment it
        #: reads the log, not up to when it was started (a pass may start late, under load).
        self._total = 0
        self._total_at_pass = 0
        #: Commits between two passes (None: ``FIRST_PASS_COMMITS``), set by each pass.
        self.every: int | None = None
        #: The log's pages the last pass found.
        self._last_pages = 0
        self._running = False
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        #: The checkpoints' own connection, made on first use on the checkpointer's thread.
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        #: True while a restart waits for the write lock or holds it: this process's writers
        #: then queue on the driver's thread, which waits for ``restarted`` before it takes
        #: the lock, so that a restart is never starved by writers that never pause.
        self.restart_due = False
        self.restarted = threading.Event()
        self.restarted.set()
        #: Passes run, and the restarts among them (for tests and benches).
        self.passes = 0
        self.restarts = 0
        #: Restarts not tried because a reader kept the pass from copying the whole log.
        self.held_off = 0

    def committed(self) -> None:
        """A writer committed: every ``every`` commits, start a checkpoint unless one is
        running. Called on the committing thread, after its commit: it never raises, and
        costs an increment otherwise."""
        self._commits += 1
        self._total += 1
        if self._commits < (self.every or FIRST_PASS_COMMITS):
            return
        with self._lock:
            if self._running or self._closed:
                return
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="hookgate-sqlite-wal")
            try:
                self._executor.submit(self._checkpoint)
            except RuntimeError:  # the interpreter is shutting down: no new threads
                return  # (never raise to a writer whose commit is done)
            self._running = True
            self._commits = 0

    def engine_committed(self, _connection: object) -> None:
        """``committed``, as SQLAlchemy's ``commit`` event calls it."""
        self.committed()

    def _checkpoint(self) -> None:
        try:
            if self._conn is None:  # kept: opening one reads the schema (0.4 ms of CPU)
                self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=0,
                                             check_same_thread=False)
            self._run(self._conn)
        except sqlite3.Error as exc:
            log.warning("checkpointing the write-ahead log of %s failed: %s (the log keeps "
                        "every page; the next checkpoint tries again)", self.path, exc)
            self._close_connection()  # the next checkpoint starts from a new connection
        finally:
            with self._lock:
                self._running = False
                closing = self._closed
            if closing:
                self._close_connection()

    def _run(self, conn: sqlite3.Connection) -> None:
        total = self._total  # the commits up to this read of the log
        row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        self.passes += 1
        pages, copied = (row[1], row[2]) if row else (-1, -1)
        counted, self._total_at_pass = total - self._total_at_pass, total
        self._pace(pages, counted)
        if pages < RESTART_PAGES:
            return
        if copied < pages:
            # A reader is still in an older part of the log: a restart would hold every
            # writer until it ends. The log is left as SQLite leaves it for such a reader.
            self.held_off += 1
            return
        # Writes that went on during the pass are still to copy, and a log is started again
        # from its beginning only once all of it is copied and no reader is still in it.
        conn.execute(f"PRAGMA busy_timeout={RESTART_WAIT_MS}")
        self.restarted.clear()
        self.restart_due = True
        try:
            busy, pages, copied = conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
        finally:
            self.restart_due = False
            self.restarted.set()
            conn.execute("PRAGMA busy_timeout=0")
        self.restarts += 1
        if not busy:
            self._last_pages = 0  # the next writer starts the log again from its beginning
        else:
            log.info("the write-ahead log of %s could not be started again within %d ms "
                     "(%d of %d pages copied): a reader or a writer held it; tried again "
                     "later", self.path, RESTART_WAIT_MS, copied, pages)

    def _pace(self, pages: int, counted: int) -> None:
        """Set the commits until the next pass from the pages appended per commit since the
        pass before (``counted`` commits; a log shorter than then was started again in
        between)."""
        appended = pages - self._last_pages if pages >= self._last_pages else pages
        self._last_pages = max(pages, 0)
        if appended <= 0 or counted <= 0:
            return
        per_commit = appended / counted
        self.every = max(MIN_COMMITS, min(MAX_COMMITS, round(PAGES_PER_PASS / per_commit)))

    def wait_for_restart(self) -> None:
        """Until a restart in progress ends (at most its own wait and a little more)."""
        if not self.restarted.is_set():
            self.restarted.wait(RESTART_WAIT_MS / 1000 + 1)

    def close(self) -> None:
        """No more checkpoints; one in flight ends on its own and closes the connection."""
        with self._lock:
            self._closed = True
            running = self._running
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)
        if not running:
            self._close_connection()

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
