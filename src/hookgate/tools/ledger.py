"""At-most-once execution: a record per (run id, tool call id) claimed before a tool runs.

The guarded path claims the record before it invokes a tool. If the process dies while the
tool runs, the claim stays without a result, and a resumed run will not run it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol


@dataclass(slots=True, frozen=True)
class PriorExecution:
    """A tool call that was claimed before; ``observation`` is None if it never finished.

    ``tool_name`` and ``args_sha256`` say which call claimed it (None: not recorded), so a
    call id re-used for another call is not answered with the first call's result.
    """

    observation: str | None
    ok: bool | None
    tool_name: str | None = None
    args_sha256: str | None = None


class FinishedCall(NamedTuple):
    """What a tool returned for its claim (``ExecutionLedger.finish``'s arguments)."""

    run_id: str
    tool_call_id: str
    observation: str
    ok: bool


class ExecutionLedger(Protocol):
    """Where claims live. In memory for a library run; a database table for the server."""

    async def claim(
        self, run_id: str, tool_call_id: str, tool_name: str, args_sha256: str
    ) -> PriorExecution | None:
        """Claim the call; return the earlier record instead if it was claimed before."""
        ...

    async def finish(self, run_id: str, tool_call_id: str, observation: str, ok: bool) -> None:
        """Store what the tool returned (as the model will see it)."""
        ...


class InMemoryLedger:
    """A ledger for one process; enough for runs that are never resumed elsewhere."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], PriorExecution] = {}

    async def claim(
        self, run_id: str, tool_call_id: str, tool_name: str, args_sha256: str
    ) -> PriorExecution | None:
        key = (run_id, tool_call_id)
        prior = self._rows.get(key)
        if prior is not None:
            return prior
        self._rows[key] = PriorExecution(None, None, tool_name, args_sha256)
        return None

    async def finish(self, run_id: str, tool_call_id: str, observation: str, ok: bool) -> None:
        claimed = self._rows.get((run_id, tool_call_id))
        self._rows[(run_id, tool_call_id)] = PriorExecution(
            observation, ok, claimed.tool_name if claimed else None,
            claimed.args_sha256 if claimed else None)
