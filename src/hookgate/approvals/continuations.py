"""Where a parked run goes on when its request changes state: the port between the approvals
and the run layer. The approvals are built with one; the run queue (PostgreSQL) registers with
it when it is built, so neither constructor needs the other and no attribute of either is set
from outside. Without a registered queue a waiting call waits in memory (SQLite, a library)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from hookgate.approvals.records import ConfirmationRequest
    from hookgate.approvals.service import ApprovalAsk
    from hookgate.storage.transaction import Transaction


class RunContinuation(Protocol):
    """What continues stored runs: the run queue."""

    async def after_transition(self, session: Transaction,
                               request: ConfirmationRequest) -> None:
        """Queue (or take) the continuation of ``request``'s run in ``session``'s
        transaction, the one that changes the request's status."""

    def parks(self, ask: ApprovalAsk) -> bool:
        """Whether the call asking ``ask`` parks its run instead of waiting in memory."""


class ContinuationAlreadyRegistered(RuntimeError):
    """A second run queue tried to continue the same approvals' runs."""


class RunContinuations:
    """The approvals' one continuation of parked runs, registered by the run queue."""

    __slots__ = ("_continuation",)

    def __init__(self) -> None:
        self._continuation: RunContinuation | None = None

    def register(self, continuation: RunContinuation) -> None:
        if self._continuation is not None:
            raise ContinuationAlreadyRegistered(
                "these approvals' runs are already continued by another run queue")
        self._continuation = continuation

    async def after_transition(self, session: Transaction,
                               request: ConfirmationRequest) -> None:
        if self._continuation is not None:
            await self._continuation.after_transition(session, request)

    @property
    def registered(self) -> bool:
        return self._continuation is not None

    def parks(self, ask: ApprovalAsk) -> bool:
        return self._continuation is not None and self._continuation.parks(ask)
