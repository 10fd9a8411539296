"""The hot statements, each written once as a SQLAlchemy Core construct and compiled once per
dialect (at a backend's first use): the backends execute the cached SQL text on their raw
driver connections (``sqlite3``'s ``?``, asyncpg's ``$n``), with no ORM and no per-call
compilation in the way. See docs/decisions/0006-statements-compiled-once.md.

Each compiled statement checks its parameter order against the order its callers pass
values in (``Compiled.names``), so a change to a construct that moves a parameter fails at
the first use instead of writing a value into the wrong column.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from operator import itemgetter
from typing import Any, Literal, cast

from sqlalchemy import (
    String,
    Table,
    Text,
    bindparam,
    case,
    exists,
    literal_column,
    select,
    union_all,
    update,
)
from sqlalchemy import cast as type_cast
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement, ColumnClause

from hookgate.storage.tables import (
    AuditChainHead,
    ConnectorCallLog,
    Org,
    RateLimitCounter,
    RevokedToken,
    RunEventRow,
    RunRow,
    SessionFactRow,
    ToolExecutionRow,
    User,
)

DialectName = Literal["sqlite", "postgresql"]
_DIALECTS: dict[DialectName, Dialect] = {
    "sqlite": sqlite.dialect(paramstyle="qmark"),
    "postgresql": postgresql.dialect(paramstyle="numeric_dollar"),  # type: ignore[no-untyped-call]
}

#: The columns a checkpoint sets, in the order of the statements' parameters.
CHECKPOINT_COLUMNS = ("id", "agent_id", "org_id", "user_id", "conversation_id", "engine",
                      "status", "state_json", "answer", "error", "updated_at")
#: A checkpoint's parameters: its columns, then created_at and fence (a new row's only).
CHECKPOINT_PARAMS = (*CHECKPOINT_COLUMNS, "created_at", "fence")
#: What a checkpoint of a stored run changes: a run's identity (its agent, org, user,
#: conversation and engine) is written once, with its row. Named in an upsert's SET, a
#: column's indexes are rewritten even to the same value (on SQLite, a page of each in the
#: WAL per checkpoint: ``ix_runs_org_id``; decision record 0041).
CHECKPOINT_MOVES = ("status", "state_json", "answer", "error", "updated_at")
_AUDIT_CONTENT = tuple(c.name for c in cast(Table, ConnectorCallLog.__table__).columns
                       if c.name not in ("id", "chain", "seq", "prev_hash", "row_hash",
                                         "hash_v"))
#: An audit row's columns, in the order of the insert's parameters.
AUDIT_COLUMNS = ("chain", "seq", *_AUDIT_CONTENT, "prev_hash", "row_hash", "hash_v")
#: An audit row's values (a dict by column) as a tuple in `AUDIT_COLUMNS` order.
audit_row_values: Callable[[dict[str, Any]], tuple[Any, ...]] = itemgetter(*AUDIT_COLUMNS)


@dataclass(frozen=True, slots=True)
class Compiled:
    """A statement's SQL text for one dialect, and where each of its parameters comes from
    in the values its callers pass (``order``: None when they pass them as it takes them)."""

    sql: str
    order: tuple[int, ...] | None
    #: ``order`` as one C-level reorder (`operator.itemgetter`); None when ``order`` is.
    _pick: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None = field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        order = self.order
        pick: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None = None
        if order is not None:
            # itemgetter of one index gives the item itself, of several a tuple.
            pick = itemgetter(*order) if len(order) > 1 else (lambda v: (v[order[0]],))
        object.__setattr__(self, "_pick", pick)

    def args(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        """The statement's parameters from ``values`` (in its callers' order)."""
        pick = self._pick
        return values if pick is None else pick(values)


def insert_for(dialect: str | Dialect) -> Callable[[Table], Any]:
    """The INSERT construct with ON CONFLICT of ``dialect`` (the two share one API)."""
    name = dialect if isinstance(dialect, str) else dialect.name
    return pg_insert if name == "postgresql" else sqlite_insert


#: A constant written into the SQL (not a parameter the callers would have to pass).
_ONE: ColumnClause[Any] = literal_column("1")


def _p(*names: str) -> dict[str, Any]:
    return {n: bindparam(n) for n in names}


def _checkpoint_upsert(dialect: str) -> ClauseElement:
    stmt = insert_for(dialect)(cast(Table, RunRow.__table__)).values(_p(*CHECKPOINT_PARAMS))
    return cast(ClauseElement, stmt.on_conflict_do_update(
        index_elements=["id"],
        set_={c: stmt.excluded[c] for c in CHECKPOINT_MOVES}))


def _event_insert(dialect: str) -> ClauseElement:
    stmt = insert_for(dialect)(cast(Table, RunEventRow.__table__)).values(
        _p("run_id", "seq", "type", "data", "created_at"))
    return cast(ClauseElement, stmt.on_conflict_do_nothing(index_elements=["run_id", "seq"])
                .inline())


def _fence(lock: Literal["none", "share", "update"]) -> Callable[[str], ClauseElement]:
    def build(_: str) -> ClauseElement:
        stmt = select(RunRow.fence).where(RunRow.id == bindparam("run_id"))
        if lock == "none":
            return stmt
        return stmt.with_for_update(read=lock == "share", key_share=True)
    return build


def _take_over(_: str) -> ClauseElement:
    return (update(RunRow).where(RunRow.id == bindparam("run_id"))
            .values(fence=RunRow.fence + _ONE, updated_at=bindparam("at"))
            .returning(RunRow.fence, RunRow.state_json))


def _claim(dialect: str) -> ClauseElement:
    stmt = insert_for(dialect)(cast(Table, ToolExecutionRow.__table__)).values(
        _p("run_id", "tool_call_id", "tool_name", "args_sha256", "started_at"))
    return cast(ClauseElement, stmt.on_conflict_do_nothing())


def _claim_finished(dialect: str) -> ClauseElement:
    """A claim whose record is known when it is made: claimed and finished in one."""
    stmt = insert_for(dialect)(cast(Table, ToolExecutionRow.__table__)).values(
        _p("run_id", "tool_call_id", "tool_name", "args_sha256", "started_at",
           "observation", "ok", "finished_at"))
    return cast(ClauseElement, stmt.on_conflict_do_nothing())


def _prior(_: str) -> ClauseElement:
    t = ToolExecutionRow
    return select(t.observation, t.ok, t.tool_name, t.args_sha256).where(
        t.run_id == bindparam("run_id"), t.tool_call_id == bindparam("tool_call_id"))


#: How many entries of one run `_prior_among` reads at once (fewer: a key repeated).
PRIOR_AMONG = 3


def _prior_among(_: str) -> ClauseElement:
    """`_prior` of up to `PRIOR_AMONG` entries of one run in one read, each with its key:
    one lookup of the whole key per entry. Written as ``run_id = ? AND tool_call_id IN
    (...)``, PostgreSQL may plan it (a generic plan made while the table was small keeps it)
    as an index scan on ``run_id`` alone with the keys as a filter, which reads every entry
    of the run: a long session's calls grew slower with each call before it (decision
    record 0047)."""
    t = ToolExecutionRow
    return union_all(*(
        select(t.tool_call_id, t.observation, t.ok, t.tool_name, t.args_sha256).where(
            t.run_id == bindparam("run_id"), t.tool_call_id == bindparam(f"key{i}"))
        for i in range(PRIOR_AMONG)))


def among_keys(keys: Sequence[str]) -> tuple[str, ...]:
    """``keys`` as `_prior_among` takes them: exactly `PRIOR_AMONG`, the first repeated."""
    if not 0 < len(keys) <= PRIOR_AMONG:
        raise ValueError(f"one read takes 1 to {PRIOR_AMONG} ledger entries, not {len(keys)}")
    return (*keys, *(keys[0],) * (PRIOR_AMONG - len(keys)))


def _finish(_: str) -> ClauseElement:
    t = ToolExecutionRow
    return (update(t).where(t.run_id == bindparam("run_id"),
                            t.tool_call_id == bindparam("tool_call_id"))
            .values(observation=bindparam("observation"), ok=bindparam("ok"),
                    finished_at=bindparam("at")))


def _events_after(_: str) -> ClauseElement:
    e = RunEventRow
    return (select(e.type, e.data, e.seq)
            .where(e.run_id == bindparam("run_id"), e.seq > bindparam("seq"))
            .order_by(e.seq))


def _summary(_: str) -> ClauseElement:
    return select(RunRow.org_id, RunRow.status, RunRow.state_json).where(
        RunRow.id == bindparam("run_id"))


def _org_read_only(_: str) -> ClauseElement:
    return select(Org.read_only).where(Org.id == bindparam("org_id"))


#: A user's columns as the hot reads give them (``backends.base.UserRow``'s order).
_USER_COLUMNS = (User.id, User.org_id, User.admin, User.name, User.service, User.disabled,
                 User.token_expires_at)


def _token_user(_: str) -> ClauseElement:
    """The user holding a token digest, and whether the digest is revoked, in one read."""
    revoked = (select(_ONE).where(RevokedToken.token_sha256 == bindparam("digest"))
               .exists())
    return select(*_USER_COLUMNS, revoked).where(User.token_sha256 == bindparam("digest"))


def _session_facts(_: str) -> ClauseElement:
    f = SessionFactRow
    return (select(f.kind, f.trusted, f.source, f.text, f.call_id)
            .where(f.session == bindparam("session")).order_by(f.id))


def _person(_: str) -> ClauseElement:
    return select(*_USER_COLUMNS).where(User.id == bindparam("user_id"))


def _rate_take(dialect: str) -> ClauseElement:
    """Start a new window at 1, or add 1 while under the limit; a full window updates
    nothing and returns no row."""
    table = cast(Table, RateLimitCounter.__table__)
    stmt = insert_for(dialect)(table).values(
        key=bindparam("key"), window_start=bindparam("start"), count=_ONE)
    old, new = table.c, stmt.excluded
    newer = old.window_start < new.window_start
    return cast(ClauseElement, stmt.on_conflict_do_update(
        index_elements=["key"],
        set_={"count": case((newer, _ONE), else_=old["count"] + _ONE),
              "window_start": case((newer, new.window_start), else_=old.window_start)},
        where=newer | (old["count"] < bindparam("limit")),
    ).returning(old["count"]))


def _audit_reserve(dialect: str) -> ClauseElement:
    """Reserve ``n`` seq numbers on a chain's head (a write: it takes the chain's lock
    first) and return the last seq and hash before them."""
    table = cast(Table, AuditChainHead.__table__)
    stmt = insert_for(dialect)(table).values(
        chain=bindparam("chain"), last_seq=bindparam("n"), last_hash=bindparam("genesis"))
    return cast(ClauseElement, stmt.on_conflict_do_update(
        index_elements=["chain"], set_={"last_seq": table.c.last_seq + bindparam("n")},
    ).returning(table.c.last_seq, table.c.last_hash))


def _audit_set_head(_: str) -> ClauseElement:
    table = cast(Table, AuditChainHead.__table__)
    return (update(table).where(table.c.chain == bindparam("chain"))
            .values(last_hash=bindparam("last_hash")))


def _audit_move_head(_: str) -> ClauseElement:
    """Move a chain's head past rows linked to the head its writer remembers, only if that
    is still the head (a write: under the lock it takes, no other writer moves it)."""
    t = cast(Table, AuditChainHead.__table__).c
    return (update(AuditChainHead)
            .where(t.chain == bindparam("chain"), t.last_seq == bindparam("was_seq"),
                   t.last_hash == bindparam("was_hash"))
            .values(last_seq=bindparam("seq"), last_hash=bindparam("last_hash")))


def _audit_insert(_: str) -> ClauseElement:
    return cast(Table, ConnectorCallLog.__table__).insert().values(_p(*AUDIT_COLUMNS)).inline()


#: A session fact's columns, in the order of the insert's parameters.
FACT_COLUMNS = ("session", "kind", "trusted", "source", "call_id", "text", "created_at")


def _fact_insert(_: str) -> ClauseElement:
    return cast(Table, SessionFactRow.__table__).insert().values(_p(*FACT_COLUMNS)).inline()


def _fact_insert_once(dialect: str) -> ClauseElement:
    """A request kept only if its session holds none with its text (a request is kept once
    per session): one statement, where a read and an insert took a transaction. The check
    names the kind as it is written, so that it reads the session's requests through their
    own index (``ix_session_facts_requests``), not every result of the session (decision
    record 0047). PostgreSQL is told each value's type (it cannot infer one in a SELECT
    list); SQLite takes them as they come (a CAST would give a timestamp's text numeric
    affinity)."""
    table = cast(Table, SessionFactRow.__table__)
    kept = select(_ONE).where(table.c.session == bindparam("session"),
                              table.c.kind == literal_column("'request'"),
                              table.c.text == bindparam("text"))
    values = [bindparam(c) if dialect != "postgresql" else type_cast(bindparam(c), (
        # A length in the cast would cut a value too long; the column's own check refuses it.
        String() if isinstance(table.c[c].type, String) and not isinstance(
            table.c[c].type, Text) else table.c[c].type)) for c in FACT_COLUMNS]
    return table.insert().from_select(list(FACT_COLUMNS),
                                      select(*values).where(~exists(kept)))


#: name -> (its construct per dialect, the parameter order its callers pass).
_STATEMENTS: dict[str, tuple[Callable[[str], ClauseElement], tuple[str, ...]]] = {
    "checkpoint_upsert": (_checkpoint_upsert, CHECKPOINT_PARAMS),
    "event_insert": (_event_insert, ("run_id", "seq", "type", "data", "created_at")),
    "fence": (_fence("none"), ("run_id",)),
    "fence_share": (_fence("share"), ("run_id",)),
    "fence_update": (_fence("update"), ("run_id",)),
    "take_over": (_take_over, ("at", "run_id")),
    "claim": (_claim, ("run_id", "tool_call_id", "tool_name", "args_sha256", "started_at")),
    "claim_finished": (_claim_finished, ("run_id", "tool_call_id", "tool_name", "args_sha256",
                                         "started_at", "observation", "ok", "finished_at")),
    "prior": (_prior, ("run_id", "tool_call_id")),
    "prior_among": (_prior_among, ("run_id", *(f"key{i}" for i in range(PRIOR_AMONG)))),
    "finish": (_finish, ("observation", "ok", "at", "run_id", "tool_call_id")),
    "events_after": (_events_after, ("run_id", "seq")),
    "summary": (_summary, ("run_id",)),
    "org_read_only": (_org_read_only, ("org_id",)),
    "token_user": (_token_user, ("digest",)),
    "person": (_person, ("user_id",)),
    "session_facts": (_session_facts, ("session",)),
    "rate_take": (_rate_take, ("key", "start", "limit")),
    "audit_reserve": (_audit_reserve, ("chain", "n", "genesis")),
    "audit_set_head": (_audit_set_head, ("last_hash", "chain")),
    "audit_move_head": (_audit_move_head, ("seq", "last_hash", "chain", "was_seq",
                                            "was_hash")),
    "audit_insert": (_audit_insert, AUDIT_COLUMNS),
    "fact_insert": (_fact_insert, FACT_COLUMNS),
    "fact_insert_once": (_fact_insert_once, FACT_COLUMNS),
}


class StatementOrderError(RuntimeError):
    """A construct's compiled parameters are not the ones its callers pass."""


@cache
def compiled(name: str, dialect: DialectName) -> Compiled:
    """Statement ``name`` compiled for ``dialect``: once per process, then cached."""
    build, expected = _STATEMENTS[name]
    done = cast(SQLCompiler, build(dialect).compile(dialect=_DIALECTS[dialect]))
    names = tuple(done.positiontup or ())
    if set(names) != set(expected):
        raise StatementOrderError(f"statement {name!r} on {dialect} takes {names}, its "
                                  f"callers pass {expected}")
    order = tuple(expected.index(n) for n in names)
    return Compiled(str(done), None if order == tuple(range(len(expected))) else order)


def statement_names() -> tuple[str, ...]:
    return tuple(_STATEMENTS)
