"""Which attempt a gated ``tools/call`` belongs to, so a client's retry never runs it twice.

A call that needs a person is keyed by agent, user, tool and the digest of its arguments;
the key names a run (``mcp-<key>``). The call joins the latest confirmation request of that
run while it is pending, or decided (approved or rejected) within the retry window: the
retry then meets the same decision, and the execution ledger hands back the recorded result
instead of calling the downstream server again. Past the window, or with no request, the
call is a new attempt: the n-th of its run, with the call id ``mcpcall-<key>-<n>``. Two
instances that take the same call at the same moment therefore name the same attempt, and
the unique (run, tool call) of ``confirmation_requests`` lets one request win.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from hookgate.storage.confirmations import ConfirmationRecord
from hookgate.storage.database import Database
from hookgate.storage.mcp_attempts import joinable_or_count, request_of
from hookgate.storage.types import utcnow
from hookgate.tools.tool import args_digest

#: Statuses whose decision a retry inherits; an expired or cancelled request is asked anew.
_INHERITED = ("approved", "rejected")


def call_key(agent_id: str, user_id: str, tool: str, args: object) -> str:
    """The identity of "this user asks this agent to run this tool with these arguments"."""
    digest = args_digest(args) if isinstance(args, dict) else args_digest({"raw": str(args)})
    material = "\x00".join((agent_id, user_id, tool, digest))
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class Attempt:
    """The (run, tool call) a call runs under; ``joined`` when it continues an earlier one."""

    run_id: str
    tool_call_id: str
    joined: bool


def fresh_attempt(run_id: str | None = None) -> Attempt:
    """A new attempt (of the keyed run ``run_id``, or of a one-off run). A one-off run is
    named by the same 128 random bits as its one call: each ungated call draws once."""
    drawn = secrets.token_hex(16)
    return Attempt(run_id or f"mcp-{drawn}", f"mcpcall-{drawn}", joined=False)


def run_of(key: str) -> str:
    """The run every attempt of the call ``key`` belongs to."""
    return f"mcp-{key[:48]}"


def attempt_call_id(key: str, number: int) -> str:
    """The tool call id of the ``number``-th attempt (from 0) of the call ``key``."""
    return f"mcpcall-{key[:48]}-{number}"


class AttemptFinder:
    """Finds the attempt for a call key in the ``confirmation_requests`` table."""

    def __init__(self, db: Database, retry_window_s: float) -> None:
        self.db = db
        self.window = timedelta(seconds=retry_window_s)

    async def attempt_for(self, key: str) -> Attempt:
        run_id = run_of(key)
        found = await joinable_or_count(self.db, run_id, self._joinable)
        if isinstance(found, ConfirmationRecord):
            return Attempt(run_id, found.tool_call_id, joined=True)
        # Not random: whoever else counts the same rows picks the same call id, and the
        # database keeps one request for it (see the module's docstring). Every attempt
        # that got anywhere left a request or an execution (one approved by a rule has no
        # request), so the sum only grows and never names a used id.
        return Attempt(run_id, attempt_call_id(key, found), joined=False)

    async def request_for(self, run_id: str, tool_call_id: str
                          ) -> ConfirmationRecord | None:
        """The confirmation request of one attempt, if the gate created one."""
        return await request_of(self.db, run_id, tool_call_id)

    def _joinable(self, row: ConfirmationRecord) -> bool:
        if row.status == "pending":
            return True
        if row.status not in _INHERITED or row.responded_at is None:
            return False
        responded = row.responded_at
        now = utcnow()
        if responded.tzinfo is None:
            now = now.replace(tzinfo=None)
        return now - responded <= self.window
