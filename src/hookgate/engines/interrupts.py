"""Signals that stop a run's advance without ending the run: it parked at a pending approval,
or another executor took it over. Both are BaseExceptions so that no hook, tool or engine
``except Exception`` turns them into a failed call or a failed run."""

from __future__ import annotations


class RunInterrupt(BaseException):
    """The advance of a run stops here; its checkpoint says where to continue."""


class RunParked(RunInterrupt):
    """A call of the run waits for a person: the run is checkpointed as awaiting approval and
    holds no task while it waits; the decision (or the expiry) continues it."""

    def __init__(self, request_id: str) -> None:
        super().__init__(f"the run waits for request {request_id}")
        self.request_id = request_id


class Fenced(RunInterrupt):
    """Another executor took the run over (this one was presumed dead): nothing this one does
    from now on may be written — no checkpoint, no event, no tool claim."""


def first_to_raise(errors: list[BaseException]) -> BaseException:
    """Of the errors of calls that ran together, the one to raise: a failure or a takeover
    before a parked call, since parking only means "continue later"."""
    return next((e for e in errors if not isinstance(e, RunParked)), errors[0])
