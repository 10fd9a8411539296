"""What a guard answers: a session's start, a verdict before a tool call, the observation
after it. Plain frozen dataclasses, the same from the in-process guard and the HTTP client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SessionStarted:
    session_id: str
    #: Text SessionStart hooks add for the model (None: nothing).
    context: str | None
    #: Why hookgate stopped the session at SessionStart (None: it goes on); every call of a
    #: stopped session is denied.
    stopped: str | None = None


@dataclass(frozen=True)
class Allowed:
    """Run the tool with exactly these arguments."""

    #: hookgate's id of the call (used by wait/report).
    call: str
    #: Possibly rewritten by a hook or edited by the approver.
    arguments: dict[str, Any]
    #: E.g. "approved by alice ... with edited arguments: amount 500 -> 50"; tell the model.
    note: str | None


@dataclass(frozen=True)
class Denied:
    call: str
    #: What the model may be told.
    reason: str


@dataclass(frozen=True)
class Pending:
    call: str
    #: The approval request (inbox / CLI / chat).
    request_id: str
    #: Why a person must decide.
    reason: str | None


@dataclass(frozen=True)
class AlreadyRan:
    """This exact call ran before (the client stopped after the tool started)."""

    call: str
    observation: str


Verdict = Allowed | Denied | Pending | AlreadyRan


@dataclass(frozen=True)
class Decided:
    """What a person decided on a pending call, learnt without starting it (``decision``):
    ask again (``before_call`` or ``wait``) for the verdict that runs it."""

    call: str
    request_id: str
    approved: bool
    reason: str | None
    #: Approved: the arguments the person approved (their edit, if they made one); the call
    #: runs with the ones the verdict carries when it is asked again. None when rejected.
    arguments: dict[str, Any] | None = None


#: What ``decision`` answers: still pending, decided, or the call ran already.
Decision = Pending | Decided | AlreadyRan


@dataclass(frozen=True)
class Observation:
    call: str
    #: What the model may see (rewritten, truncated or the fixed withheld text).
    text: str
    withheld: bool
