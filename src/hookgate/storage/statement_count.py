"""Counting the SQL a process sends, for bench/throughput.py: off unless asked for.

With ``HOOKGATE_SQL_COUNT_FILE`` set, every statement through SQLAlchemy or a backend's driver and
every SQLAlchemy transaction is counted, and a daemon thread writes the totals as JSON to
that file when they change (at most four times a second) and at least once a second (the
bench reads it from outside the server process).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

ENV_VAR = "HOOKGATE_SQL_COUNT_FILE"
_CHECK_EVERY_S = 0.25
_WRITE_AT_LEAST_EVERY_S = 1.0


class StatementCount:
    """Process-wide totals; ``enabled`` is read once, from the environment."""

    def __init__(self, target: str | None) -> None:
        self.target = Path(target) if target else None
        self.statements = 0
        self.transactions = 0
        self._writer: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.target is not None

    def statement(self, *_: object) -> None:
        with self._lock:  # the event loop's thread and the driver paths' threads both count
            self.statements += 1

    def transaction(self, *_: object) -> None:
        with self._lock:
            self.transactions += 1

    def start(self) -> None:
        """Start writing the totals (once per process)."""
        with self._lock:
            if self.target is None or self._writer is not None:
                return
            self._writer = threading.Thread(target=self._write_forever, daemon=True,
                                            name="hookgate-sql-count")
            self._writer.start()

    def _write_forever(self) -> None:
        assert self.target is not None
        partial = self.target.with_suffix(".tmp")
        written: tuple[int, int] | None = None
        written_at = 0.0
        while True:
            now = (self.statements, self.transactions)
            if now != written or time.monotonic() - written_at >= _WRITE_AT_LEAST_EVERY_S:
                partial.write_text(json.dumps({"statements": now[0], "transactions": now[1],
                                               "at": time.time()}))
                partial.replace(self.target)  # readers never see half a file
                written, written_at = now, time.monotonic()
            time.sleep(_CHECK_EVERY_S)


COUNT = StatementCount(os.environ.get(ENV_VAR))
