"""The SQLite driver of a database that was garbage-collected is closed by a finalizer, which
runs wherever the collector happens to run — once it ran inside another executor's
``submit`` (a new worker thread's creation set off the collection), where the process-wide
lock of ``concurrent.futures`` is held: a driver that submitted its close there deadlocked the
server's event loop. Closing must take no such lock."""

from __future__ import annotations

import asyncio
import gc
import threading
from concurrent.futures import thread as futures_thread
from pathlib import Path

from hookgate.storage.backends.sqlite_driver import SqliteDriver
from hookgate.storage.database import Database


async def test_a_collected_databases_driver_closes_while_the_submit_lock_is_held(
        tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}")
    await db.upgrade()
    driver = db.backend.driver
    assert isinstance(driver, SqliteDriver)
    assert await driver.read(lambda c: c.execute("SELECT 1").fetchone()[0]) == 1
    await db.dispose()
    worker = driver._executor  # to see the driver stopped
    del driver

    finished = threading.Event()

    def collect_inside_submit() -> None:
        # As inside ThreadPoolExecutor.submit: the process-wide lock is held while the
        # garbage collector runs the finalizer of the dropped database's driver.
        with futures_thread._global_shutdown_lock:
            gc.collect()
        finished.set()

    del db  # the driver's finalizer now waits for the collector
    collector = threading.Thread(target=collect_inside_submit, daemon=True)
    collector.start()
    assert await asyncio.to_thread(finished.wait, 10), "closing the driver deadlocked"
    assert worker._shutdown  # the driver's worker was told to stop
