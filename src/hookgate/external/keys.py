"""The typed keys of the external path: run ids, call ids and execution-ledger entries are
hashes over the canonical JSON of typed tuples (never strings joined with a separator), and
the ids a caller sends are checked first, so no two distinct calls can share a key.
"""

from __future__ import annotations

import enum
import functools
import unicodedata
from dataclasses import dataclass

from hookgate.canonical import canonical_sha256

#: Unicode categories an id may not hold: controls (NUL among them), format characters,
#: surrogates, private use, unassigned, and the line and paragraph separators.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


class BadId(ValueError):
    """An id a caller sent cannot name a call or session; the text says which and why."""


def checked_id(name: str, value: object, limit: int) -> str:
    """``value`` if it is a non-empty string of at most ``limit`` characters with no
    control, format or separator character; else BadId naming ``name``."""
    if not isinstance(value, str) or not value or len(value) > limit:
        raise BadId(f"'{name}' must be a non-empty string of at most {limit} characters")
    for i, char in enumerate(value):
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            raise BadId(f"'{name}' holds a control, format or separator character "
                        f"(U+{ord(char):04X} at {i}); ids are printable text")
    return value


@functools.lru_cache(maxsize=2048, typed=True)
def typed_hash(*parts: str | int | None) -> str:
    """40 hex digits of sha256 over the canonical JSON array of ``parts``. Kept for the
    latest keys: one guarded call computes its session's run id, its call id and its
    ledger entries' keys several times over (a pure function of the parts)."""
    return canonical_sha256(list(parts))[:40]


def session_run_id(prefix: str, agent_id: str, user_id: str, session: str,
                   acting: tuple[str | None] | None = None) -> str:
    """The run an external session is: ``prefix`` and the typed hash of (prefix, agent,
    user, session); one per agent, user and session id. ``acting``: a service identity's
    session acting for someone (``(person,)``, or ``(None,)`` for nobody) is a run of its
    own for each, so no decision for one initiator's call is found for another's."""
    if acting is None:
        return prefix + typed_hash("session-run", prefix, agent_id, user_id, session)
    return prefix + typed_hash("session-run", prefix, agent_id, user_id, session,
                               "acting-for", acting[0])


class EntryKind(enum.Enum):
    """What an execution-ledger entry of the external path records."""

    #: The call was allowed and started (its arguments, then its observation).
    STARTED = "started"
    #: Who decided the call, kept from PreToolUse for PostToolUse's audit row.
    DECISION = "decision"
    #: The call's facts under its hookgate id (``gc_...``), for wait and report.
    INDEX = "index"
    #: A session's parent and delegation depth.
    SESSION = "session"
    #: A session its SessionStart chain stopped (the reason is the record).
    STOPPED = "stopped"
    #: The one PostToolUse of a call (claimed by the report that runs it).
    REPORT = "report"
    #: Where a call id was first asked from (Claude Code's working directory).
    PLACE = "place"
    #: An occurrence of a call whose id hookgate derives (an agent that sends none) was
    #: allowed: the next identical call is another occurrence (coding_agents/call_ids.py).
    OCCURRENCE = "occurrence"


@dataclass(frozen=True, slots=True)
class Entry:
    """One ledger entry: its kind and the ids it is about (a call id, a session id)."""

    kind: EntryKind
    about: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The entry's ``tool_call_id`` column: the kind, then the typed hash."""
        return _entry_key(self.kind, self.about)


@functools.lru_cache(maxsize=4096)
def _entry_key(kind: EntryKind, about: tuple[str, ...]) -> str:
    # Kept for the latest entries: one guarded call names each of its entries several
    # times (an enum's ``value`` and the hash's arguments cost more than this lookup).
    value = kind.value
    return f"{value}-{typed_hash(value, *about)}"
