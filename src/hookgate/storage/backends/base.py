"""What a storage backend is: the one object per database, chosen once when the Database is
built, that owns the database's fast connection path and runs the run layer's and the
hooks' hot operations on it. Nothing outside ``storage/backends/`` asks which database it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from hookgate.engines.events import RunEvent
from hookgate.storage.backends.statements import DialectName
from hookgate.tools.ledger import FinishedCall

if TYPE_CHECKING:
    from hookgate.storage.fencing import Fence
    from hookgate.storage.limit_claim_model import Claimed, Want
    from hookgate.storage.run_writes import Checkpoint
    from hookgate.storage.transaction import Transaction


class VoteExists(Exception):
    """This person already has a vote on this request."""


class NotNow:
    """What a write that was to be done "only if it can be done this instant" returns when
    it would have had to wait (and nothing was done)."""


NOT_NOW = NotNow()
#: The hash an audit chain's first row links to.
GENESIS = "0" * 64


class RunSummaryRow(NamedTuple):
    """A run's org, status and stored state; ``logged`` its events when read with it."""

    org_id: str | None
    status: str
    state_json: str
    logged: list[RunEvent] | None


@dataclass(frozen=True, slots=True)
class AlongWrite:
    """More work in a checkpoint's own statement (a backend that ``carries_ledger``): CTEs
    that may read ``up`` (the run's row, written only while the fence holds), their
    parameters written ``$P1``, ``$P2``…, and ``result``, an SQL expression whose value the
    statement returns to ``seen``."""

    ctes: str
    result: str
    args: tuple[Any, ...]
    seen: Callable[[Any], None]


class UserRow(NamedTuple):
    """A user's record as the sign-in check and the authority checks read it now."""

    id: str
    org_id: str
    admin: bool
    name: str
    service: bool
    disabled: bool
    #: Aware UTC, or None (the token does not expire).
    token_expires_at: datetime | None


class PriorRow(NamedTuple):
    """An earlier claim of a tool call: its record in the ledger."""

    observation: str | None
    ok: bool | None
    tool_name: str
    args_sha256: str


#: A call to claim in the ledger: (run, tool call, tool name, arguments' digest).
ClaimRow = tuple[str, str, str, str]


#: A tool's result for its claim, written with the run's next checkpoint (the tool ran:
#: written whatever the checkpoint's fence says).
LedgerFinish = FinishedCall


class AuditPlace(Protocol):
    """Where an audit record went (``storage.audit.Appended``)."""

    @property
    def seq(self) -> int: ...

    @property
    def row_hash(self) -> str: ...


#: Places records after a chain's head: (chain, records, last seq reserved, previous hash)
#: -> (the rows by column, where each record went). ``storage.audit`` owns the hashing.
AuditLink = Callable[[str, Sequence[Any], int, str],
                     tuple[list[dict[str, Any]], list[Any]]]
#: A session fact's values in `statements.FACT_COLUMNS` order, less ``created_at``.
FactRow = tuple[str, str, bool, str, str | None, str]
#: A session fact as read back: kind, trusted, source, text, call id.
FactRead = tuple[str, bool, str, str, str | None]
#: Records to append, by chain, in the order the chains are locked.
AuditGroups = Sequence[tuple[str, Sequence[Any]]]


class Backend(Protocol):
    """One database's storage backend (``Database.backend``)."""

    #: Which SQL dialect its statements are compiled for.
    dialect: DialectName
    #: Whether one process serves the database, running its runs in memory (a SQLite file)
    #: rather than through the run queue, several instances sharing it (PostgreSQL).
    in_process: bool
    #: Whether ``SELECT … FOR UPDATE`` locks rows (SQLite has one lock for the database).
    locks_rows: bool

    def now_expression(self) -> Any:
        """The time for a statement to write as "now": the database's clock where it has
        one that every instance shares, else this process's."""
        ...

    async def now(self) -> datetime:
        """The database's clock (decision and expiry times come from here)."""
        ...

    def startup_lock(self) -> AbstractAsyncContextManager[None]:
        """Serialise start-up work across the processes starting on this database."""
        ...

    async def lock_migrations(self, conn: AsyncConnection) -> None:
        """Inside ``conn``'s transaction: make other migrators wait for this one."""
        ...

    async def begin_new_schema(self, conn: AsyncConnection) -> bool:
        """Begin ``conn``'s transaction holding what makes other migrators wait, and say
        whether the database holds no relation of its own yet (a new schema may be made)."""
        ...

    async def notify(self, session: Transaction, channel: str, payload: str) -> None:
        """Wake ``channel``'s readers once ``session``'s transaction commits."""
        ...

    @property
    def sqlite_file(self) -> str | None:
        """The database's file, for a SQLite file; None otherwise."""
        ...

    # -- runs --------------------------------------------------------------------------

    #: Whether ``write_run`` takes ``finishes`` and ``claim`` into its transaction (else
    #: the ledger writes them on their own).
    carries_ledger: bool

    async def write_run(self, run_id: str, *, checkpoint: Checkpoint | None,
                        events: Sequence[RunEvent], fence: Fence | None,
                        finishes: Sequence[LedgerFinish] = (),
                        claim: ClaimRow | None = None,
                        along: AlongWrite | None = None) -> PriorRow | None:
        """The checkpoint and the events in one transaction, only while ``fence`` holds.
        Where the backend ``carries_ledger``, with a checkpoint: ``finishes`` (whatever the
        fence says) and ``claim`` (only with the fenced checkpoint) in the same one; the
        earlier claim's record then, if the call was claimed before; and ``along``."""
        ...

    async def write_in_session(self, session: AsyncSession, run_id: str, *,
                               checkpoint: Checkpoint | None, events: Sequence[RunEvent],
                               fence: Fence | None) -> None:
        """`write_run` inside the caller's transaction."""
        ...

    async def take_over(self, run_id: str) -> tuple[Fence, str] | None:
        """Raise the run's fence (after every write in flight) and read its stored state."""
        ...

    async def events_after(self, run_id: str, seq: int) -> list[RunEvent]:
        """The run's logged events with seq > ``seq``, in order."""
        ...

    async def run_summary(self, run_id: str, *, with_log: bool, after: int
                          ) -> RunSummaryRow | None:
        """The run's org, status and state; with ``with_log``, its events after ``after``
        when they come in the same statement (else ``logged`` is None)."""
        ...

    # -- the hooks' records ------------------------------------------------------------

    async def claim(self, row: tuple[str, str, str, str], fence: Fence | None
                    ) -> PriorRow | None:
        """Claim (run, call, tool, digest) in the ledger; the earlier claim if there was
        one. With ``fence``, only while its token is current (else Fenced)."""
        ...

    async def recorded(self, run_id: str, tool_call_id: str) -> PriorRow | None:
        ...

    async def recorded_among(self, run_id: str, keys: Sequence[str]
                             ) -> dict[str, PriorRow]:
        """The records of up to three entries of one run in one read, by key (an entry
        never claimed is not there)."""
        ...

    async def claim_finished(self, row: tuple[str, str, str, str], observation: str,
                             ok: bool) -> PriorRow | None:
        """`claim` and `finish` in one statement, for a record known when it is claimed;
        the earlier claim's record (left as it was) if there was one."""
        ...

    async def claim_finished_reading(self, row: tuple[str, str, str, str], observation: str,
                                     ok: bool, run_id: str, keys: Sequence[str]
                                     ) -> tuple[PriorRow | None, dict[str, PriorRow]]:
        """`claim_finished`, and `recorded_among` of ``run_id``'s ``keys`` (records of
        another run than the claim's) as they were at the claim or just after it: one
        statement where the backend can."""
        ...

    async def finish(self, run_id: str, tool_call_id: str, observation: str, ok: bool
                     ) -> None:
        ...

    async def finish_all(self, finishes: Sequence[LedgerFinish]) -> None:
        """Each `finish` in order; on a backend with transactions per write, in one."""
        ...

    async def org_read_only(self, org_id: str) -> bool | None:
        ...

    async def add_fact(self, row: FactRow, *, once: bool = False) -> None:
        """Keep one fact of a session (``session_facts``), committed before this returns:
        one statement on the fast path. ``once`` (the row is a request): not if the session
        already holds a request with its text (read in the same statement)."""
        ...

    async def add_fact_finishing(self, row: FactRow, finishes: Sequence[LedgerFinish], *,
                                 once: bool = False) -> None:
        """`add_fact`, and the ledger ``finishes`` in the same write: both are kept, or
        neither (the error is raised)."""
        ...

    async def session_facts(self, session: str) -> list[FactRead]:
        """The session's facts in the order they were kept (one read, no transaction)."""
        ...

    # -- approval requests ---------------------------------------------------------------

    async def request_columns(self, request_id: str) -> dict[str, Any] | None:
        """Request ``request_id``'s row (``confirmation_requests``) by column, its values as
        the table's types give them (JSON decoded, times aware UTC); one read, no
        transaction."""
        ...

    async def request_at_use(self, run_id: str, tool_call_id: str, tool_name: str,
                             args_sha256: str) -> dict[str, Any] | None:
        """`request_columns` of the call's own request, else of the run's latest rejected
        request for this tool and these arguments: one read, the call's own first."""
        ...

    def change_transaction(self) -> AbstractAsyncContextManager[Transaction]:
        """The transaction a request's status change commits in, with the work done with
        it (``then``): on PostgreSQL the driver's (asyncpg), else an ORM session's."""
        ...

    async def change_request(self, tx: Transaction, request_id: str, status: str, *,
                             now: datetime | None, unexpired: bool,
                             decision: dict[str, Any], vote: dict[str, Any] | None
                             ) -> dict[str, Any] | None:
        """In ``tx`` (of `change_transaction`): move a pending request to ``status`` with
        the ``decision`` columns, at ``now`` (None: the database's clock), with
        ``unexpired`` only if it has not expired by then; and ``vote``, the decider's row
        of ``approval_votes`` (its columns but the request's id), only if it changed. The
        row as it now is, by column (`request_columns`' form), or None if nothing changed.
        VoteExists if they voted before (the transaction is then failed)."""
        ...

    # -- people ------------------------------------------------------------------------

    async def token_user(self, digest: str) -> tuple[UserRow, bool] | None:
        """The user whose token has sha256 ``digest``, and whether that digest is revoked;
        None when no user holds it. One read of the latest commit, no transaction."""
        ...

    async def person(self, user_id: str) -> UserRow | None:
        """User ``user_id``'s record as it is now (one read, no transaction)."""
        ...

    async def mark_followed(self, run_id: str) -> None:
        """From now on the run's writes wake other processes (a stream there follows it);
        a backend that wakes no other process does nothing."""
        ...

    async def take_rate_slot(self, key: str, start: int, limit: int) -> bool:
        """Count one call in ``key``'s window from ``start``, if under ``limit``."""
        ...

    async def claim_limits(self, call_key: str, wants: Sequence[Want], now: float | None
                           ) -> Claimed:
        """One call's claims on session-aware limits in one transaction, serialised per limit
        key (storage/backends/limit_claims.py); ``now`` None: the database's clock."""
        ...

    def append_audit_now(self, groups: AuditGroups, link: AuditLink
                         ) -> list[list[Any]] | NotNow:
        """The records appended right here if that needs no wait, else NOT_NOW."""
        ...

    async def append_audit(self, groups: AuditGroups, link: AuditLink) -> list[list[Any]]:
        """The records appended to their chains in one transaction."""
        ...
