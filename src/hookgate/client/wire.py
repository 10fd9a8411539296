"""The JSON shapes of the ``/api/v1`` answers, read into the guard's typed results (shared by
the HTTP clients and the in-process guard, so both answer alike). Anything else — a missing
field, an unknown decision, a field of the wrong type — is GuardAnswerInvalid naming it (the
call does not run).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from hookgate.client.errors import GuardAnswerInvalid
from hookgate.client.types import (
    Allowed,
    AlreadyRan,
    Decided,
    Decision,
    Denied,
    Observation,
    Pending,
    SessionStarted,
    Verdict,
)

T = TypeVar("T")
#: The decisions a verdict may carry (``decided`` only answers a peek).
VERDICTS = ("allow", "deny", "pending", "already_ran")
_JSON_NAMES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
               int: "a number", float: "a number", type(None): "null"}


def json_kind(value: Any) -> str:
    """What JSON calls ``value``'s type ("an object", "an array", ...)."""
    return _JSON_NAMES.get(type(value), type(value).__name__)


def _field(body: Mapping[str, Any], name: str, kind: type[T], what: str, *,
           optional: bool = False) -> T:
    """``body[name]``, which must be of ``kind`` (or null/absent when ``optional``)."""
    if name not in body or (optional and body[name] is None):
        if optional:
            return None  # type: ignore[return-value]
        raise GuardAnswerInvalid(f"hookgate's answer is not {what}: it has no {name!r}, so "
                                 "the call does not run")
    value = body[name]
    if not isinstance(value, kind):
        raise GuardAnswerInvalid(f"hookgate's answer is not {what}: its {name!r} is "
                                 f"{json_kind(value)}, so the call does not run")
    return value


def _text(body: Mapping[str, Any], name: str, what: str, *, optional: bool = False) -> Any:
    return _field(body, name, str, what, optional=optional)


def _decision(body: Mapping[str, Any], allowed: tuple[str, ...], what: str) -> str:
    decision: str = _text(body, "decision", what)
    if decision not in allowed:
        raise GuardAnswerInvalid(f"hookgate answered an unknown decision {decision!r} (it "
                                 f"documents {', '.join(allowed)}), so the call does not run")
    return decision


def verdict(body: Mapping[str, Any]) -> Verdict:
    """The verdict of a call's answer; GuardAnswerInvalid if it is not one (fail closed)."""
    what = "a verdict"
    decision = _decision(body, VERDICTS, what)
    call: str = _text(body, "call", what)
    if decision == "deny":
        return Denied(call, _text(body, "reason", what, optional=True) or "denied by hookgate")
    if not call:
        raise GuardAnswerInvalid(f"hookgate's answer is not {what}: its 'call' is empty, so "
                                 "the call does not run")
    if decision == "allow":
        return Allowed(call, _field(body, "arguments", dict, what),
                       _text(body, "note", what, optional=True))
    if decision == "pending":
        return Pending(call, _text(body, "request_id", what),
                       _text(body, "reason", what, optional=True))
    return AlreadyRan(call, _text(body, "observation", what))


def decision(body: Mapping[str, Any]) -> Decision:
    """What a person decided (``GET /api/v1/calls/{call}?peek=true``)."""
    what = "a decision"
    found = _decision(body, ("decided", *VERDICTS), what)
    if found in ("allow", "deny"):
        raise GuardAnswerInvalid(f"hookgate answered {found!r} where a decision was asked "
                                 "for, so the call does not run")
    if found != "decided":
        read = verdict(body)
        assert isinstance(read, Pending | AlreadyRan)
        return read
    return Decided(_text(body, "call", what), _text(body, "request_id", what),
                   _field(body, "approved", bool, what),
                   _text(body, "reason", what, optional=True),
                   _field(body, "arguments", dict, what, optional=True))


def session(body: Mapping[str, Any]) -> SessionStarted:
    what = "a session"
    return SessionStarted(_text(body, "session_id", what),
                          _text(body, "context", what, optional=True),
                          _text(body, "stopped", what, optional=True))


def observation(body: Mapping[str, Any]) -> Observation:
    what = "an observation"
    return Observation(_text(body, "call", what), _text(body, "text", what),
                       _field(body, "withheld", bool, what))
