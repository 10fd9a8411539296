"""What happens to a request nobody decides: reminders, escalation, the timeout fallback.

A value an `Agent` carries, so it lives below the agent and the approvals that act on it.
An agent's `EscalationPolicy` is copied onto each request it makes (``followup`` column), so
every instance follows up the same way whatever its own configuration says, and so does a
request made before a configuration change. Durations are read from ``15m``-style text.
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

log = logging.getLogger(__name__)

OnTimeout = Literal["reject", "expire"]
ON_TIMEOUT: tuple[str, ...] = ("reject", "expire")
#: Names in ``escalate_to`` that stand for several users (resolved when it escalates).
ESCALATION_GROUPS: tuple[str, ...] = ("admins", "agent_owner")

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


class PolicyError(ValueError):
    """A follow-up setting that cannot work (said in words a configuration author acts on)."""


def parse_duration(value: Any, key: str) -> float:
    """Seconds from a number (seconds) or text such as ``90s``, ``15m``, ``2h``, ``1d``."""
    if isinstance(value, bool):
        raise PolicyError(f"{key} must be a duration such as 15m or 90s, not {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.fullmatch(value)):
        seconds = float(m.group(1)) * _UNIT_S[m.group(2)]
    else:
        raise PolicyError(f"{key} must be a duration such as 15m, 90s, 2h or 1d, "
                          f"not {value!r}")
    if not seconds > 0 or seconds == float("inf"):
        raise PolicyError(f"{key} must be longer than zero, not {value!r}")
    return seconds


@dataclass(slots=True, frozen=True)
class EscalationPolicy:
    """An agent's follow-up settings (all off except the timeout fallback, ``reject``)."""

    #: First reminder this long after the request was made; the next ones as long apart.
    remind_after_s: float | None = None
    #: How many reminders at most (1: remind once).
    max_reminders: int = 1
    escalate_after_s: float | None = None
    #: User ids, or ``admins`` (the org's admins) / ``agent_owner``.
    escalate_to: tuple[str, ...] = ()
    #: Where the escalation card goes (default: where the request's card went).
    escalation_channel_id: str | None = None
    on_timeout: OnTimeout = "reject"

    def __post_init__(self) -> None:
        if self.max_reminders < 1:
            raise PolicyError(f"max_reminders must be at least 1, not {self.max_reminders}")
        if self.on_timeout not in ON_TIMEOUT:
            raise PolicyError(_on_timeout_error(self.on_timeout))
        if (self.escalate_after_s is None) != (not self.escalate_to):
            raise PolicyError("escalate_after and escalate_to go together: give both "
                              "(when, and to whom) or neither")

    def check_against(self, timeout_s: float) -> None:
        """Refuse follow-ups that could never happen before the request times out."""
        for key, after in (("remind_after", self.remind_after_s),
                           ("escalate_after", self.escalate_after_s)):
            if after is not None and after >= timeout_s:
                raise PolicyError(f"{key} ({after:g} s) must be shorter than "
                                  f"confirmation_timeout_s ({timeout_s:g} s), or it never "
                                  "happens")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["escalate_to"] = list(self.escalate_to)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> EscalationPolicy:
        """The policy stored on a request; a request from before follow-ups expires.

        A stored policy that no longer reads (edited by hand, damaged) follows up on
        nothing and times out by rejecting: it must never keep a request from ending."""
        if not data:
            return cls(on_timeout="expire")
        try:
            return cls(
                remind_after_s=_seconds(data.get("remind_after_s")),
                max_reminders=int(data.get("max_reminders", 1)),
                escalate_after_s=_seconds(data.get("escalate_after_s")),
                escalate_to=tuple(str(u) for u in data.get("escalate_to") or ()),
                escalation_channel_id=data.get("escalation_channel_id"),
                on_timeout=data.get("on_timeout", "expire"),
            )
        except (PolicyError, TypeError, ValueError, AttributeError):
            log.warning("a stored follow-up policy does not read (%r); the request is "
                        "rejected when it times out and has no follow-ups", data)
            return cls()

    def next_reminder_at(self, created_at: datetime, sent: int) -> datetime | None:
        if self.remind_after_s is None or sent >= self.max_reminders:
            return None
        return created_at + timedelta(seconds=self.remind_after_s * (sent + 1))

    def escalation_at(self, created_at: datetime,
                      escalated_at: datetime | None) -> datetime | None:
        if self.escalate_after_s is None or escalated_at is not None:
            return None
        return created_at + timedelta(seconds=self.escalate_after_s)


def _seconds(value: Any) -> float | None:
    return None if value is None else parse_duration(value, "a stored duration")


def _on_timeout_error(value: object) -> str:
    if value == "approve":
        # Nobody decided: letting the call run would approve it on nobody's word.
        return ("on_timeout: approve is not offered: a call nobody approved must not run. "
                "Use reject (the default; a retry of the same call is refused too) or expire")
    return f"on_timeout must be one of {', '.join(ON_TIMEOUT)}, not {value!r}"
