"""The audit log's storage: hash-chained rows in ``connector_call_logs``, appended with group
commit, read page by page, and verified.

**The chain.** There is one chain per org (``chain`` is the org id; ``""`` for calls without
an org), so an org's log can be checked and exported on its own and, on PostgreSQL, other
orgs' appends never wait for its lock. Each row stores ``prev_hash``, the ``row_hash`` of
the row before it in its chain (``GENESIS`` for the first), and its own ``row_hash``: the
sha256 of ``"hookgate-audit-v<hash_v>\\n"`` followed by the row's canonical form (see
``canonical_form``). ``hash_v`` says which canonical form: 6 is RFC 8785
(``hookgate.canonical``) over every field, the service identity that asked a call
acting for a person (``acting_service``) included: every row that names one is
written with it; 5 is the same form without it, the session the call belongs to
(``session_id``) included: every other row that names its session is written with it;
4 is the same form without the session, where a sub-agent's call sits in its delegation
tree included (``parent_session``, ``depth``): every other row that records a delegation is
written with it; 3 is the same form without those two fields, the decision on the call included
(``approver``, ``request_id``, ``wait_us``): every other row that records a decision is
written with it; 2 is the form without the decision either, for rows that record neither
(their form is exactly what it was before version 3); 1, rows written before RFC 8785, is
sorted-key JSON with everything past ASCII escaped. A row's version is in its hash's prefix,
so changing it breaks the row. The order of a chain is its hash links; ``seq`` numbers the
rows for reading and is not hashed.
``audit_chain_heads`` keeps each chain's last seq and hash, which shows a cut-off tail.

**Appending.** A batch is one transaction: an upsert on the chain head reserves the seq
numbers and returns the previous hash — being a write, it takes the head's row lock on
PostgreSQL and SQLite's one write lock before anything is read, so no snapshot can go stale
— then the rows, then the head's new hash. Writers in any number of processes queue on that
lock, so a chain never forks. Within a process, rows that arrive while a batch is being
written go together into the next one (group commit), and each append returns only once
the transaction holding its row has committed. The database's backend runs the transaction
on its fast path (storage/backends/: on a SQLite file one hop on its driver).

**One round trip on PostgreSQL.** The PostgreSQL backend remembers the head it last wrote
for each chain. When a batch holds one chain whose head it knows, it links the rows to that
head and sends one statement: update the head *only if it is still the remembered one*,
and insert the rows only if that update happened. The update takes the head's row lock (a
writer in another process that got there first makes its condition false), so the chain
still cannot fork; when it matches nothing, the backend forgets the head and appends the
locking way.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Literal, cast

from sqlalchemy import Table, select
from sqlalchemy.exc import SQLAlchemyError

from hookgate.canonical import NotCanonicalJSON, canonical_bytes
from hookgate.storage.backends.base import GENESIS as GENESIS
from hookgate.storage.backends.base import NotNow
from hookgate.storage.database import Database, DatabaseError
from hookgate.storage.tables import AuditChainHead, ConnectorCallLog

#: The canonical form rows that name their session are written with, then a sub-agent's
#: rows (see the module docstring); other rows that record a decision are written with
#: ``HASH_V``, rows that record neither with ``HASH_V_WITHOUT_DECISION``.
HASH_V_SESSION = 5
HASH_V_DELEGATED = 4
HASH_V = 3
HASH_V_WITHOUT_DECISION = 2
#: The canonical form of a service identity's rows (``acting_service``): every field.
HASH_V_ACTING = 6
#: The versions a row may say it was hashed with.
HASH_VERSIONS = (1, 2, 3, 4, 5, 6)
Outcome = Literal["ok", "error", "blocked", "withheld"]
OUTCOMES: tuple[str, ...] = ("ok", "error", "blocked", "withheld")

_LOG = cast(Table, ConnectorCallLog.__table__)
_HEAD = cast(Table, AuditChainHead.__table__)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """What one row says about one tool call (everything but its place in the chain)."""

    created_at: datetime
    tool_name: str
    connector: str | None
    agent_id: str | None
    user_id: str | None
    org_id: str | None
    run_id: str | None
    tool_call_id: str | None
    execution_path: str | None
    #: The masked arguments as canonical JSON text: exactly what is hashed and stored.
    args_json: str
    #: sha256 of the exact (unmasked) arguments, as the approval gate pins them.
    args_sha256: str
    outcome: str
    blocked_by: str | None
    detail: str | None
    result_chars: int | None
    result_sha256: str | None
    #: The tool's own time: from after the decision on the call (if one was waited for).
    latency_us: int
    #: Who decided the call: a person's user id, or ``rule ar_… (created by alice)``.
    approver: str | None = None
    #: The confirmation request the call waited on (None when a standing rule decided).
    request_id: str | None = None
    #: How long the request waited for its decision (creation to decision), in µs.
    wait_us: int | None = None
    #: A sub-agent's call: the session (on the engines, the run) that delegated to it.
    parent_session: str | None = None
    #: A sub-agent's call: how many delegations down it is (1: a direct sub-agent).
    depth: int | None = None
    #: The session (or conversation) the call belongs to, as the agent named it.
    session_id: str | None = None
    #: The service identity that asked a call acting for ``user_id`` (its initiator; None:
    #: the initiator asked themself).
    acting_service: str | None = None

    @property
    def chain(self) -> str:
        return self.org_id or ""

    @property
    def hash_v(self) -> int:
        """The canonical form this record is written with (see the module docstring)."""
        if self.acting_service is not None:
            return HASH_V_ACTING
        if self.session_id is not None:
            return HASH_V_SESSION
        if (self.parent_session, self.depth) != (None, None):
            return HASH_V_DELEGATED
        decided = (self.approver, self.request_id, self.wait_us) != (None, None, None)
        return HASH_V if decided else HASH_V_WITHOUT_DECISION


_CONTENT = tuple(f.name for f in fields(AuditRecord))
#: The fields about the decision on a call: hashed from version 3 on.
_DECISION = ("approver", "request_id", "wait_us")
#: The fields about a sub-agent's place in its delegation tree: hashed from version 4 on.
_DELEGATION = ("parent_session", "depth")
#: The field naming the call's session: hashed from version 5 on.
_SESSION = ("session_id",)
#: The field naming the service that asked for a person: hashed from version 6 on.
_ACTING = ("acting_service",)
#: The fields each version's form leaves out.
_LEFT_OUT: dict[int, tuple[str, ...]] = {
    1: (*_DECISION, *_DELEGATION, *_SESSION, *_ACTING),
    2: (*_DECISION, *_DELEGATION, *_SESSION, *_ACTING),
    3: (*_DELEGATION, *_SESSION, *_ACTING), 4: (*_SESSION, *_ACTING), 5: _ACTING, 6: ()}
#: The fields each version's form covers, in record order.
_COVERED: dict[int, tuple[str, ...]] = {
    v: tuple(n for n in _CONTENT if n not in left_out) for v, left_out in _LEFT_OUT.items()}


def _v1_json(value: Any) -> str:
    """The canonical form of version 1 rows (keys sorted, no spaces, everything beyond ASCII
    escaped, other objects as ``str``); kept only to verify the rows written with it."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      default=str)


def canonical_form(record: AuditRecord, prev_hash: str, hash_v: int | None = None) -> bytes:
    """The bytes a row's hash covers: the JSON object of every field of ``record`` (with
    ``created_at`` as ISO-8601 UTC to the microsecond), plus ``chain`` and ``prev_hash``,
    in the canonical form of version ``hash_v`` (the record's own unless told; versions
    1 and 2 leave out the decision, delegation and session fields, 3 the delegation and
    session ones, 4 the session). Raises NotCanonicalJSON (versions 2 to 5) for a record
    JSON cannot say exactly; the audit hook hands over none."""
    hash_v = record.hash_v if hash_v is None else hash_v
    names = _COVERED.get(hash_v)
    if names is None:
        raise ValueError(f"audit rows have no hash version {hash_v!r} (known: {HASH_VERSIONS})")
    content: dict[str, Any] = {name: getattr(record, name) for name in names}
    content["created_at"] = _timestamp(record.created_at)
    content["chain"] = record.chain
    content["prev_hash"] = prev_hash
    if hash_v == 1:
        return _v1_json(content).encode("utf-8")
    return canonical_bytes(content)


def row_hash(record: AuditRecord, prev_hash: str, hash_v: int | None = None) -> str:
    """The hash of a row of version ``hash_v`` (the one the record is written with unless
    told)."""
    hash_v = record.hash_v if hash_v is None else hash_v
    prefix = f"hookgate-audit-v{hash_v}\n".encode("ascii")
    return hashlib.sha256(prefix + canonical_form(record, prev_hash, hash_v)).hexdigest()


def _timestamp(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def record_of(row: Mapping[str, Any]) -> AuditRecord:
    """The record a stored row holds (for re-hashing it)."""
    return AuditRecord(**{name: row[name] for name in _CONTENT})


@dataclass(frozen=True, slots=True)
class Appended:
    """Where a record went: its chain, seq and hash."""

    chain: str
    seq: int
    row_hash: str


class AuditLogStore:
    """Appends records to their chains; one per database per process (``shared``)."""

    _instances: weakref.WeakKeyDictionary[Database, AuditLogStore] = (
        weakref.WeakKeyDictionary())

    def __init__(self, db: Database) -> None:
        self.db = db
        self._pending: list[tuple[AuditRecord, asyncio.Future[Appended]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def shared(cls, db: Database) -> AuditLogStore:
        """The process's store for ``db``, so every session's hooks share one group commit."""
        store = cls._instances.get(db)
        if store is None:
            store = cls._instances[db] = cls(db)
        return store

    async def append(self, record: AuditRecord) -> Appended:
        """Add ``record`` to its chain; returns once the row is committed, raises if not."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (tests, a CLI's asyncio.run)
            self._loop, self._pending, self._writer = loop, [], None
        if self._writer is None and not self._pending:
            # Nothing to group with: on a SQLite file whose write lock is free the row is
            # committed right here, with no writer task and no future to wait on. (A sync
            # call: no cancellation can cut it off half-way.)
            now = self.db.backend.append_audit_now([(record.chain, [record])], _linked)
            if not isinstance(now, NotNow):
                return now[0][0]  # type: ignore[no-any-return]
        done: asyncio.Future[Appended] = loop.create_future()
        self._pending.append((record, done))
        if self._writer is None:
            # The writer is a task of its own: a caller that is cancelled while waiting
            # must not cancel the transaction that holds other callers' rows.
            self._writer = loop.create_task(self._write_pending())
        return await done

    async def _write_pending(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    placed = await self._write([r for r, _ in batch])
                except BaseException as exc:
                    for _, done in batch:
                        if not done.done():
                            done.set_exception(exc if isinstance(exc, Exception)
                                               else RuntimeError(f"audit write stopped: {exc!r}"))
                    if not isinstance(exc, Exception):
                        raise
                    continue
                for (_, done), where in zip(batch, placed, strict=True):
                    if not done.done():
                        done.set_result(where)
        finally:
            self._writer = None

    async def _write(self, records: Sequence[AuditRecord]) -> list[Appended]:
        by_chain: dict[str, list[int]] = {}
        for i, record in enumerate(records):
            by_chain.setdefault(record.chain, []).append(i)
        # Chains in a fixed order: two processes that write the same chains lock them the
        # same way round and cannot deadlock.
        groups = [(chain, [records[i] for i in by_chain[chain]]) for chain in sorted(by_chain)]
        appended = await self.db.backend.append_audit(groups, _linked)
        placed: list[Appended | None] = [None] * len(records)
        for (chain, _), where in zip(groups, appended, strict=True):
            for i, one in zip(by_chain[chain], where, strict=True):
                placed[i] = one
        return [p for p in placed if p is not None]

    # -- reading ---------------------------------------------------------------------------

    async def page(self, org_id: str, *, limit: int = 50, before_id: int | None = None,
                   agent_id: str | None = None, user_id: str | None = None,
                   tool_name: str | None = None, outcome: str | None = None,
                   since: datetime | None = None, until: datetime | None = None,
                   session_id: str | None = None) -> list[dict[str, Any]]:
        """The org's rows, newest first, ``limit`` of them, older than row ``before_id``."""
        t = ConnectorCallLog
        q = select(_LOG).where(t.org_id == org_id)
        for column, value in ((t.agent_id, agent_id), (t.user_id, user_id),
                              (t.tool_name, tool_name), (t.outcome, outcome),
                              (t.session_id, session_id)):
            if value is not None:
                q = q.where(column == value)
        if since is not None:
            q = q.where(t.created_at >= since)
        if until is not None:
            q = q.where(t.created_at < until)
        if before_id is not None:
            q = q.where(t.id < before_id)
        q = q.order_by(t.id.desc()).limit(limit)
        async with self.db.engine.connect() as conn:
            rows = (await conn.execute(q)).mappings().all()
        return [public_row(dict(r)) for r in rows]


def _linked(chain: str, records: Sequence[AuditRecord], last_seq: int, prev: str
            ) -> tuple[list[dict[str, Any]], list[Appended]]:
    """The rows of ``records`` placed after the ``last_seq`` reserved for them."""
    seq = last_seq - len(records)
    rows, out = [], []
    for record in records:
        seq += 1
        digest = row_hash(record, prev)
        # Every field is a scalar: a shallow dict, not asdict()'s deep copy of each one.
        row = {name: getattr(record, name) for name in _CONTENT}
        row.update(chain=chain, seq=seq, prev_hash=prev, row_hash=digest,
                   hash_v=record.hash_v)
        rows.append(row)
        out.append(Appended(chain, seq, digest))
        prev = digest
    return rows, out


def public_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A stored row as the API shows it: arguments as JSON, times as ISO-8601."""
    out = {k: row[k] for k in ("id", "chain", "seq", *_CONTENT, "prev_hash", "row_hash",
                               "hash_v")}
    out["created_at"] = _timestamp(row["created_at"])
    out["args"] = json.loads(out.pop("args_json"))
    return out


# -- verifying ---------------------------------------------------------------------------

ProblemKind = Literal["edited", "inserted", "deleted"]


@dataclass(frozen=True, slots=True)
class ChainProblem:
    """One place where a chain is not what the audit log wrote, naming the row(s)."""

    chain: str
    kind: ProblemKind
    message: str
    row_id: int | None = None
    seq: int | None = None


@dataclass(slots=True)
class VerifyReport:
    """What ``verify`` found: rows checked, each chain's head, and the problems."""

    rows: int = 0
    heads: dict[str, tuple[int, str]] = field(default_factory=dict)
    problems: list[ChainProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


async def verify(db: Database, *, chain: str | None = None) -> VerifyReport:
    """Re-hash every row and follow the links of every chain (or of ``chain``)."""
    async with db.engine.connect() as conn:
        q = select(_HEAD)
        if chain is not None:
            q = q.where(_HEAD.c.chain == chain)
        heads = {r.chain: (int(r.last_seq), r.last_hash) for r in await conn.execute(q)}
        cq = select(_LOG.c.chain).distinct()
        if chain is not None:
            cq = cq.where(_LOG.c.chain == chain)
        chains = sorted(set(heads) | set((await conn.execute(cq)).scalars()))
        report = VerifyReport(heads=heads)
        for name in chains:
            result = await conn.stream(
                select(_LOG).where(_LOG.c.chain == name).order_by(_LOG.c.seq, _LOG.c.id))
            rows = [dict(r) async for r in result.mappings()]
            report.rows += len(rows)
            report.problems.extend(check_chain(name, rows, heads.get(name)))
    return report


def check_chain(chain: str, rows: Sequence[Mapping[str, Any]],
                head: tuple[int, str] | None) -> list[ChainProblem]:
    """The problems of one chain's rows (in seq order) against its head.

    An edited row no longer matches its own hash (or, re-hashed, the hash its successor
    recorded); an inserted row is skipped by the links around it; a deleted row leaves a
    link pointing at a hash no row has, or the head pointing past the last row.
    """
    problems: list[ChainProblem] = []

    def report(kind: ProblemKind, row: Mapping[str, Any] | None, message: str) -> None:
        problems.append(ChainProblem(chain, kind, message,
                                     row["id"] if row else None, row["seq"] if row else None))

    index_of_hash = {r["row_hash"]: i for i, r in enumerate(rows)}
    first_linking_to: dict[str, int] = {}
    for i, r in enumerate(rows):
        first_linking_to.setdefault(r["prev_hash"], i)

    expected = GENESIS  # the hash the next genuine row must point at
    last_genuine: Mapping[str, Any] | None = None
    i = 0
    while i < len(rows):
        row = rows[i]
        if not _hash_holds(row):
            report("edited", row, f"{_name(row)} was edited: its content no longer matches "
                                  "its hash")
        if row["prev_hash"] != expected:
            later = first_linking_to.get(expected)
            if later is not None and later > i:
                # The chain goes on at a later row: everything up to it was slipped in.
                for extra in rows[i:later]:
                    report("inserted", extra, f"{_name(extra)} was inserted: the chain "
                                              f"links {_around(last_genuine, rows[later])} "
                                              "past it")
                i = later
                continue
            j = index_of_hash.get(row["prev_hash"])
            if j is not None and j < i:
                # Links back to an earlier row: the rows in between were slipped in.
                for extra in rows[j + 1:i]:
                    report("inserted", extra, f"{_name(extra)} was inserted: "
                                              f"{_name(row)} links straight to "
                                              f"{_name(rows[j])}")
            else:
                report(*_explain_break(last_genuine, row))
        expected, last_genuine = row["row_hash"], row
        i += 1

    if head is not None:
        head_seq, head_hash = head
        if head_hash != expected:
            j = index_of_hash.get(head_hash)
            if j is not None:
                for extra in rows[j + 1:]:
                    report("inserted", extra, f"{_name(extra)} was inserted after the last "
                                              f"append the audit log made (seq {head_seq})")
            else:
                last_seq = last_genuine["seq"] if last_genuine else 0
                span = (f"seq {last_seq + 1}" if head_seq == last_seq + 1
                        else f"seq {last_seq + 1} to {head_seq}")
                problems.append(ChainProblem(
                    chain, "deleted",
                    f"the last row(s) of chain {chain!r} were deleted ({span}): its head "
                    f"records seq {head_seq}, but the rows end at seq {last_seq}",
                    None, last_seq + 1))
    return problems


def _hash_holds(row: Mapping[str, Any]) -> bool:
    """The row's content hashes, in the canonical form its version names, to its hash."""
    hash_v = row.get("hash_v")
    if hash_v not in HASH_VERSIONS:
        return False
    if any(row.get(name) is not None for name in _LEFT_OUT[hash_v]):
        # A field the row's version does not hash (a decision in a version 1 or 2 row, a
        # delegation in a version 1 to 3 row) was written in later.
        return False
    try:
        return bool(row_hash(record_of(row), row["prev_hash"], hash_v) == row["row_hash"])
    except NotCanonicalJSON:  # edited into something no RFC 8785 row can hold
        return False


def _explain_break(before: Mapping[str, Any] | None,
                   row: Mapping[str, Any]) -> tuple[ProblemKind, Mapping[str, Any] | None, str]:
    """``row`` points at a hash no present row has: rows were deleted, or re-hashed."""
    prev_seq = before["seq"] if before else 0
    if row["seq"] > prev_seq + 1:
        span = (f"seq {prev_seq + 1}" if row["seq"] == prev_seq + 2
                else f"seq {prev_seq + 1} to {row['seq'] - 1}")
        return ("deleted", row, f"row(s) {span} were deleted: {_name(row)} links to a row "
                                "that is gone")
    if before is None:
        return ("deleted", row, f"the first row(s) were deleted: {_name(row)} is not the "
                                "start of the chain")
    return ("edited", before, f"{_name(before)} was edited and re-hashed (or replaced): "
                              f"{_name(row)} recorded a different hash for it")


def _name(row: Mapping[str, Any]) -> str:
    return f"row {row['id']} (seq {row['seq']}, {row['tool_name']})"


def _around(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> str:
    start = _name(before) if before else "the start of the chain"
    return f"from {start} to {_name(after)}"


async def rows_between(db: Database, columns: Sequence[str], since: datetime | None,
                       until: datetime | None) -> list[dict[str, Any]]:
    """Every row (of every chain) written in ``[since, until)``, oldest first, with only
    ``columns`` (``hookgate policy replay`` reads the calls of a period)."""
    t = ConnectorCallLog
    q = select(*(_LOG.c[name] for name in columns))
    if since is not None:
        q = q.where(t.created_at >= since)
    if until is not None:
        q = q.where(t.created_at < until)
    try:
        async with db.engine.connect() as conn:
            rows = (await conn.execute(q.order_by(t.id))).mappings().all()
    except (SQLAlchemyError, OSError) as exc:
        said = " ".join(str(exc).split())[:300]
        raise DatabaseError(f"{type(exc).__name__}: {said}") from exc
    return [dict(r) for r in rows]
