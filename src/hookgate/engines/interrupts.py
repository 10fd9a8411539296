"""Signals that stop a run's advance without ending the run: it parked at a pending approval,
or another executor took it over. Both are BaseExceptions so that no hook, tool or engine
``except Exception`` turns them into a failed call or a failed run."""

from __future__ import annotations

from datetime import datetime


class RunInterrupt(BaseException):
    """The advance of a run stops here; its checkpoint says where to continue."""


class RunParked(RunInterrupt):
    """A call of the run waits for a person: the run is checkpointed as awaiting approval and
    holds no task while it waits; the decision (or the expiry) continues it."""

    def __init__(self, request_id: str, *, expires_at: datetime | None = None,
                 made: bool = False) -> None:
        """``expires_at``: when the request expires; ``made``: the call that parks created
        the request just now (no decision can have come before the run parks)."""
        super().__init__(f"the run waits for request {request_id}")
        self.request_id = request_id
        self.expires_at = expires_at
        self.made = made


class Fenced(RunInterrupt):
    """Another executor took the run over (this one was presumed dead): nothing this one does
    from now on may be written — no checkpoint, no event, no tool claim."""


class RunStopped(Exception):
    """A hook answered Claude Code's ``continue: false``: the whole run ends, with the hook's
    ``stopReason``. Raised by the driver once the call that carried it is recorded; the
    driver's ``run_to_end`` ends the run as ``session_blocked``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def first_to_raise(errors: list[BaseException]) -> BaseException:
    """Of the errors of calls that ran together, the one to raise: a takeover first (nothing
    may be written after it), then a failure, then a stop, then a parked call, since parking
    only means "continue later"."""
    def rank(e: BaseException) -> int:
        return (0 if isinstance(e, Fenced) else 2 if isinstance(e, RunStopped)
                else 3 if isinstance(e, RunParked) else 1)
    return min(errors, key=rank)
