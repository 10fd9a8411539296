"""The ways a guard fails: hookgate unreachable or failing (the call must not run), hookgate
answering something the API does not document (a redirect, a body of the wrong shape: the
call must not run either), and hookgate refusing the request (bad input, unknown agent, not
authorised).
"""

from __future__ import annotations


class GuardUnavailable(ConnectionError):
    """hookgate is unreachable or failed: the call must not run (fail closed)."""


class GuardAnswerInvalid(GuardUnavailable):
    """hookgate's answer is not one the API documents (not JSON, not an object, a missing
    field, an unknown decision, a field of the wrong type): the call must not run; the
    message names what was wrong."""


class GuardRedirected(GuardAnswerInvalid):
    """hookgate answered with a redirect (3xx), which the client never follows: the call
    must not run; point the client at the final URL (``location``)."""

    def __init__(self, message: str, location: str | None) -> None:
        super().__init__(message)
        self.location = location


class GuardRefused(Exception):
    """hookgate refused the request (4xx): bad input, unknown agent, unauthorised."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status
