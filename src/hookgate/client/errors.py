"""The two ways a guard fails: hookgate unreachable or failing (the call must not run), and
hookgate refusing the request (bad input, unknown agent, not authorised).
"""

from __future__ import annotations


class GuardUnavailable(ConnectionError):
    """hookgate is unreachable or failed: the call must not run (fail closed)."""


class GuardRefused(Exception):
    """hookgate refused the request (4xx): bad input, unknown agent, unauthorised."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status
