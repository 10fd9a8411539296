"""The JSON shapes of the ``/api/v1`` answers, read into the guard's typed results (shared by
the HTTP clients and the in-process guard, so both answer alike).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hookgate.client.errors import GuardUnavailable
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


def verdict(body: Mapping[str, Any]) -> Verdict:
    """The verdict of a call's answer; GuardUnavailable if it is not one (fail closed)."""
    try:
        call, decision = str(body["call"]), body["decision"]
        if decision == "allow":
            args = body["arguments"]
            if not isinstance(args, dict):
                raise TypeError("arguments is not an object")
            return Allowed(call, args, body.get("note"))
        if decision == "deny":
            return Denied(call, str(body.get("reason") or "denied by hookgate"))
        if decision == "pending":
            return Pending(call, str(body["request_id"]), body.get("reason"))
        if decision == "already_ran":
            return AlreadyRan(call, str(body["observation"]))
    except (KeyError, TypeError) as exc:
        raise GuardUnavailable(f"hookgate's answer is not a verdict ({exc}), so the call "
                               "does not run") from None
    raise GuardUnavailable(f"hookgate answered an unknown decision {decision!r}, so the call "
                           "does not run")


def decision(body: Mapping[str, Any]) -> Decision:
    """What a person decided (``GET /api/v1/calls/{call}?peek=true``)."""
    if body.get("decision") == "decided":
        try:
            args = body.get("arguments")
            return Decided(str(body["call"]), str(body["request_id"]), body["approved"] is True,
                           body.get("reason"), args if isinstance(args, dict) else None)
        except KeyError as exc:
            raise GuardUnavailable(f"hookgate's answer is not a decision ({exc})") from None
    found = verdict(body)
    if isinstance(found, Allowed | Denied):
        raise GuardUnavailable(f"hookgate answered {body.get('decision')!r} where a decision "
                               "was asked for")
    return found


def session(body: Mapping[str, Any]) -> SessionStarted:
    try:
        return SessionStarted(str(body["session_id"]), body.get("context"), body.get("stopped"))
    except KeyError as exc:
        raise GuardUnavailable(f"hookgate's answer is not a session ({exc})") from None


def observation(body: Mapping[str, Any]) -> Observation:
    try:
        return Observation(str(body["call"]), str(body["text"]), bool(body["withheld"]))
    except KeyError as exc:
        raise GuardUnavailable(f"hookgate's answer is not an observation ({exc})") from None
