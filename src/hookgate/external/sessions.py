"""The run an external agent's session is: one per agent, user and session id, so a request,
an approval or an execution claim of one session is never found by another user or agent
that sends the same session id.
"""

from __future__ import annotations

import hashlib


def session_run_id(prefix: str, agent_id: str, user_id: str, session: str) -> str:
    """``prefix`` and 40 hex digits of (agent, user, session)."""
    key = "\0".join((agent_id, user_id, session)).encode("utf-8", "surrogatepass")
    return prefix + hashlib.sha256(key).hexdigest()[:40]
