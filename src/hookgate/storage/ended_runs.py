"""The runs that ended in this process, kept for a short while.

A client that follows a run reads it again as soon as it ends (its event stream, then the
run itself). The end a process has just committed is final: a run that ended never
changes again (nothing continues, cancels or deletes an ended run), so the answer can come
from memory instead of the database. Kept per process for at most `KEPT_S` and for the
last `KEPT` runs; only an end that this process's own write committed is kept (a write
refused by its fence keeps nothing).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from hookgate.engines.events import RunEvent

#: How many ended runs are kept, and for how long (seconds).
KEPT = 512
KEPT_S = 30.0


@dataclass(slots=True, frozen=True)
class EndedRun:
    """A run as its end was committed: its row's org, status and state, and its trace."""

    org_id: str | None
    status: str
    state_json: str
    trace: list[dict[str, Any]]
    until: float

    def events_after(self, after: int) -> list[RunEvent]:
        """The run's events with seq > ``after``, as the event log holds them."""
        return [RunEvent.from_dict(e) for e in self.trace if int(e.get("seq", 0)) > after]


class EndedRuns:
    """The last `KEPT` runs that ended in this process, each for `KEPT_S` seconds."""

    __slots__ = ("_runs",)

    def __init__(self) -> None:
        self._runs: OrderedDict[str, EndedRun] = OrderedDict()

    def ended(self, run_id: str, org_id: str | None, status: str, state_json: str,
              trace: list[dict[str, Any]]) -> None:
        runs = self._runs
        runs[run_id] = EndedRun(org_id, status, state_json, list(trace),
                                time.monotonic() + KEPT_S)
        runs.move_to_end(run_id)
        while len(runs) > KEPT:
            runs.popitem(last=False)

    def get(self, run_id: str) -> EndedRun | None:
        run = self._runs.get(run_id)
        if run is None:
            return None
        if run.until < time.monotonic():
            del self._runs[run_id]
            return None
        return run
