"""The guard every framework adapter codes against: typed verdicts, its exceptions, the
AsyncGuard/Guard protocols and the HTTP clients of ``/api/v1`` (httpx only). The in-process
guard is ``hookgate.client.local`` (it needs the server extras).
"""

from hookgate.client.errors import (
    GuardAnswerInvalid,
    GuardRedirected,
    GuardRefused,
    GuardUnavailable,
)
from hookgate.client.http import AsyncClient, Client
from hookgate.client.protocols import AsyncGuard, Guard
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

__all__ = [
    "Allowed",
    "AlreadyRan",
    "AsyncClient",
    "AsyncGuard",
    "Client",
    "Decided",
    "Decision",
    "Denied",
    "Guard",
    "GuardAnswerInvalid",
    "GuardRedirected",
    "GuardRefused",
    "GuardUnavailable",
    "Observation",
    "Pending",
    "SessionStarted",
    "Verdict",
]
