"""The embedded executor: each run advances as a task of this process, calls wait for their
decision in memory, and runs in flight when the process stopped continue when it starts.

Only one process may execute the runs of a SQLite file, so it holds an exclusive lock on a
file beside the database for as long as it runs; a second one is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
from pathlib import Path
from typing import IO, TYPE_CHECKING

from hookgate.engines.state import RunState
from hookgate.runs.executors.base import RunEndings

if TYPE_CHECKING:
    from hookgate.runs.runner import Advance, Runner

log = logging.getLogger(__name__)


class InstanceLocked(RuntimeError):
    """Another process already executes the runs of this SQLite database."""


class InstanceLock:
    """An exclusive, non-blocking flock on ``<database>.instance.lock``."""

    def __init__(self, database_file: Path) -> None:
        self.path = database_file.with_name(database_file.name + ".instance.lock")
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        while True:
            f = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held until release()
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.seek(0)
                holder = f.read().strip() or "another process"
                f.close()
                raise InstanceLocked(
                    f"the SQLite database {self.path.with_suffix('').with_suffix('')} is "
                    f"already served by {holder}; a SQLite file serves one hookgate instance. "
                    "To run several instances, use PostgreSQL (database: postgresql://...)"
                ) from None
            if self._still_named(f):
                break
            # The holder removed the file as it let go: this lock is on a file nobody else
            # will open. Lock the one the name now points to.
            f.close()
        f.truncate(0)
        f.write(f"hookgate pid {os.getpid()}\n")
        f.flush()
        self._file = f

    def _still_named(self, f: IO[str]) -> bool:
        try:
            named = os.stat(self.path)
        except FileNotFoundError:
            return False
        held = os.fstat(f.fileno())
        return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)

    def release(self) -> None:
        """Let go and remove the file: removed while still locked, so a process waiting for
        it finds the name gone (see ``acquire``) and no second holder can appear."""
        if self._file is not None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None for an in-memory database)."""
    _, _, rest = url.partition(":///")
    path = rest.split("?", 1)[0]
    return Path(path).resolve() if path and path != ":memory:" else None


class InProcessExecutor:
    """Runs as tasks of this process (today's single-instance behaviour)."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._stopping = False
        self._endings = RunEndings()
        path = sqlite_file(runner.db.url)
        self._lock = InstanceLock(path) if path is not None else None

    async def start(self) -> None:
        if self._lock is not None:
            self._lock.acquire()
        self._stopping = False
        resumed = await self.resume_all()
        if resumed:
            log.info("resumed %d run(s) that were in flight", resumed)

    async def submit(self, state: RunState) -> None:
        m = self.runner
        await m.store.save(state)
        agent = m.agents[state.agent_id]
        self._spawn(state, m.advance(agent, state))

    async def resume_all(self) -> int:
        """Continue every run that was in flight when the last process stopped."""
        n = 0
        for state in await self.runner.store.resumable():
            if state.run_id in self.tasks:
                continue
            advance = await self.runner.prepare(state)
            if advance is None:
                continue
            self._spawn(state, advance)
            n += 1
        return n

    def _spawn(self, state: RunState, advance: Advance) -> None:
        bus = self.runner.bus
        bus.open(state.run_id, self.runner.history(state), org_id=state.org_id)

        async def go() -> None:
            try:
                await advance(lambda e: bus.publish(state.run_id, e))
            except asyncio.CancelledError:
                if not self._stopping:
                    state.status = "cancelled"
                    with contextlib.suppress(Exception):
                        await asyncio.shield(self.runner.store.save(state))
                raise
            except Exception:
                log.exception("run %s crashed", state.run_id)
            finally:
                await bus.close(state.run_id)
                self.tasks.pop(state.run_id, None)
                if state.finished and not self._stopping:
                    await self.runner.settle_requests(state)
                    self._endings.ended(state, self.runner.on_run_end)

        self.tasks[state.run_id] = asyncio.create_task(go(), name=f"run-{state.run_id}")

    async def cancel(self, run_id: str) -> bool:
        task = self.tasks.get(run_id)
        if task is None:
            return False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        return True

    async def stop(self) -> None:
        """Stop this process's runs without cancelling their requests: they resume later."""
        self._stopping = True
        tasks = list(self.tasks.values())
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await self._endings.drain()
        if self._lock is not None:
            self._lock.release()
