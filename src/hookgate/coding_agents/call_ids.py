"""Call ids for the coding agents whose hooks name no tool call (GitHub Copilot CLI): hookgate
derives one from the session, the working folder, the tool, the canonical arguments and the
call's occurrence, so that the identical retry of a call still waiting for a person IS that
call.

Occurrence n of an identical call keeps its id until hookgate allows it (it is about to run):
the retry told "approval … pending: repeat the identical call after approval" asks under the
same id, finds its own request, and is covered by the plain comparison of
hookgate/hooks/coverage.py — no `RetryReuse` exception is passed for these ids. Once allowed,
occurrence n is recorded in the execution ledger (`EntryKind.OCCURRENCE`), and the next
identical call is occurrence n+1: a call of its own, which asks again. An approval is still
used by one execution (its use is claimed), so an occurrence counted wrong (two identical
calls at the same moment) can refuse a call but never run one twice. A call refused, by a
rule or by a person, keeps its id: its identical retries get the same answer for the rest of
the session. PostToolUse names the last occurrence allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hookgate.canonical import NotCanonicalJSON, canonical_sha256
from hookgate.coding_agents.codec import BadHookInput, HookInput
from hookgate.external.keys import Entry, EntryKind, typed_hash

if TYPE_CHECKING:
    from hookgate.storage.ledger import DatabaseLedger

__all__ = ["DERIVED_PREFIX", "CallOccurrences"]

#: How a derived call id starts (an agent's own ids never reach this path).
DERIVED_PREFIX = "derived-"


@dataclass(frozen=True, slots=True)
class CallOccurrences:
    """The occurrences of one call (session, folder, tool, arguments) of one run."""

    ledger: DatabaseLedger
    run_id: str
    #: The typed hash of the working folder, tool name and arguments' digest.
    call: str

    @classmethod
    def of(cls, ledger: DatabaseLedger, run_id: str, hook: HookInput) -> CallOccurrences:
        """``hook``'s call in ``run_id`` (the run is the agent, user and session)."""
        try:
            digest = canonical_sha256(hook.arguments)
        except NotCanonicalJSON as exc:
            raise BadHookInput(f"the tool's arguments are not plain JSON: {exc}") from None
        return cls(ledger, run_id, typed_hash("derived-call", hook.cwd, hook.tool_name, digest))

    def call_id(self, occurrence: int) -> str:
        return f"{DERIVED_PREFIX}{self.call[:32]}-{occurrence}"

    def _entry(self, occurrence: int) -> Entry:
        return Entry(EntryKind.OCCURRENCE, (self.call, str(occurrence)))

    async def _was_allowed(self, occurrence: int) -> bool:
        key = self._entry(occurrence).key
        return await self.ledger.recorded(self.run_id, key) is not None

    async def current(self) -> int:
        """The first occurrence not allowed yet: the one a call asked now is."""
        # Occurrences are allowed in order (each is asked only once the one before it was
        # allowed), so they form a prefix 0..k-1: double, then halve, in O(log k) reads.
        if not await self._was_allowed(0):
            return 0
        low, high = 0, 1
        while await self._was_allowed(high):
            low, high = high, high * 2
        while high - low > 1:
            middle = (low + high) // 2
            if await self._was_allowed(middle):
                low = middle
            else:
                high = middle
        return high

    async def last_allowed(self) -> int:
        """The occurrence a PostToolUse reports: the last one allowed (0 if none was)."""
        return max(await self.current() - 1, 0)

    async def allowed(self, occurrence: int) -> None:
        """Record that ``occurrence`` was allowed: the next identical call is another one."""
        entry = self._entry(occurrence)
        if await self.ledger.claim(self.run_id, entry.key, entry.kind.value, "") is None:
            await self.ledger.finish(self.run_id, entry.key, "allowed", ok=True)
