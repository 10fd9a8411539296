"""A session's facts: what the user asked (the request) and each tool result the session has
seen, marked trusted or untrusted by the tool's (or connector's) declaration; the store
protocol every path records them through, and an in-memory store for registries without a
database; and a call's provenance as a lazy fact (`PendingProvenance`): traced from the
facts only when a hook, rule or policy reads it (`provenance_of`). hookgate.provenance traces
argument values to them; they live with the hook model because the registry carries the
store every path uses.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from hookgate.hooks.model import HookContext

#: The hooks' metadata key holding the call's provenance (`Provenance.as_fact`).
PROVENANCE_KEY = "provenance"
#: The hooks' metadata key saying the tool declared its output untrusted content.
UNTRUSTED_OUTPUT_KEY = "untrusted_output"
#: The longest text kept of one fact (a longer result is kept up to here).
MAX_FACT_CHARS = 1_000_000


class FactsUnavailable(RuntimeError):
    """The session's facts could not be kept or read (the store failed): the call or run
    they were for does not go on."""


class ProvenanceNotTraced(LookupError):
    """A hook read the call's provenance from ``metadata`` before it was traced: it should
    declare ``reads_provenance = True`` or ``await provenance_of(ctx)``."""


class FactKind(enum.StrEnum):
    REQUEST = "request"
    RESULT = "result"
    #: The result of a read the user directed: one of the call's argument values is named in
    #: the user's request ("the file 'notes.txt'", "the 'Introductory meeting' event").
    DIRECTED = "directed"


@dataclass(frozen=True, slots=True)
class Fact:
    """One thing the session has seen. ``source``: ``user`` for a request, else the tool's
    name; ``trusted``: False for a result its tool declared untrusted content."""

    kind: FactKind
    trusted: bool
    source: str
    text: str
    call_id: str | None = None

    @classmethod
    def request(cls, text: str) -> Fact:
        return cls(FactKind.REQUEST, True, "user", storable(text))

    @classmethod
    def result(cls, tool: str, text: str, *, trusted: bool, call_id: str | None,
               directed: bool = False) -> Fact:
        """A tool's result; ``directed``: the call's target was named in the user's request
        (`FactKind.DIRECTED`)."""
        kind = FactKind.DIRECTED if directed else FactKind.RESULT
        return cls(kind, trusted, tool, storable(text), call_id)

    @property
    def directed(self) -> bool:
        """The result of a read whose target the user's request names."""
        return self.kind is FactKind.DIRECTED


def storable(text: str) -> str:
    """``text`` as a fact keeps it: cut to `MAX_FACT_CHARS`, a lone surrogate or a NUL (which
    no database column holds) written as its escape. Whether the result itself can be stored
    is the run's to find out, with its own error."""
    text = text[:MAX_FACT_CHARS]
    if text.isascii() and "\x00" not in text:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


class FactStore(Protocol):
    """Where a session's facts are kept (hookgate.storage.session_facts: the database)."""

    async def add(self, session: str, fact: Fact) -> None:
        """Keep ``fact`` for ``session`` (a request already kept is not kept twice)."""
        ...

    async def facts(self, session: str) -> list[Fact]:
        """The session's facts, in the order they were kept."""
        ...


class MemoryFacts:
    """Facts held in this process only, for the most recent sessions (a registry built
    without a database: tests, evals, a library run)."""

    def __init__(self, sessions: int = 1024) -> None:
        self._held: OrderedDict[str, list[Fact]] = OrderedDict()
        self._sessions = sessions

    async def add(self, session: str, fact: Fact) -> None:
        held = self._held.setdefault(session, [])
        self._held.move_to_end(session)
        if fact.kind is FactKind.REQUEST and fact in held:
            return
        held.append(fact)
        while len(self._held) > self._sessions:
            self._held.popitem(last=False)

    async def facts(self, session: str) -> list[Fact]:
        return list(self._held.get(session, ()))


class _Identity(Protocol):
    @property
    def run_id(self) -> str: ...

    @property
    def root_run_id(self) -> str | None: ...

    @property
    def facts_session(self) -> str | None: ...


def facts_session(identity: _Identity) -> str:
    """The session whose facts a call shares: a delegated child's results count for the
    session that delegated to it (its root run, or the outside agent's root session)."""
    return identity.facts_session or identity.root_run_id or identity.run_id


class PendingProvenance:
    """A call's provenance before anything read it: ``metadata["provenance"]`` holds this
    until `provenance_of` traces it (one read of the session's facts), then the traced
    mapping. Read as a mapping while pending, it raises `ProvenanceNotTraced`: a hook that
    reads it without saying so fails (closed) rather than seeing no provenance."""

    __slots__ = ("_trace", "_traced")

    def __init__(self, trace: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        self._trace = trace
        self._traced: dict[str, Any] | None = None

    async def traced(self) -> dict[str, Any]:
        """The provenance, traced on the first call (`FactsUnavailable` if the facts cannot
        be read)."""
        if self._traced is None:
            self._traced = await self._trace()
        return self._traced

    def _unread(self) -> ProvenanceNotTraced:
        return ProvenanceNotTraced(
            "the call's provenance is traced only for hooks that read it: declare "
            "reads_provenance = True on the hook, or await "
            "hookgate.provenance.provenance_of(ctx)")

    def __getitem__(self, key: str) -> Any:
        raise self._unread()

    def get(self, key: str, default: Any = None) -> Any:
        raise self._unread()

    def __repr__(self) -> str:
        return "<provenance not traced: no hook read it>"


async def provenance_of(ctx: HookContext) -> Mapping[str, Any] | None:
    """The call's provenance (`Provenance.as_fact`), traced now if nothing read it before,
    and kept in ``ctx.metadata``; None for a context the guarded path did not make (a
    session start). `FactsUnavailable` when the session's facts cannot be read."""
    facts = ctx.facts
    held = facts.get(PROVENANCE_KEY)
    if isinstance(held, PendingProvenance):
        held = facts[PROVENANCE_KEY] = await held.traced()
    return held if isinstance(held, Mapping) else None


async def _not_traced() -> dict[str, Any]:
    raise ProvenanceNotTraced("the call's provenance is not traced before its rules are read")


#: ``metadata["provenance"]`` of a context that rules are read against before the call is
#: traced (an outside agent's or an MCP server's ``requires_confirmation`` rules): a ``when``
#: that names provenance cannot be evaluated there, so its rule applies (fail closed).
NOT_TRACED = PendingProvenance(_not_traced)
