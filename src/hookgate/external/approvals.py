"""Approvals for calls that run outside hookgate: bounded waits, one execution per approval.

A Claude Code hook (or a guarded-call API request) cannot hold a call for hours, so the gate
waits ``wait_s`` and then leaves the request pending (StillPending). The same call asked
again — the same ``tool_use_id`` after ``claude -p --resume``, or an identical retry in the
same session (same tool, same argument digest) — finds that request instead of making
another. An approval is used by exactly one execution: its use is claimed in the execution
ledger (``approval:<request id>``), and a second claim finds it taken. The binding (agent,
session, ``tool_use_id``, tool, argument digest) is checked before the claim, so a
mismatched call never uses up an approval.

For the guarded-call API the claim names the call id that owns the use, written right after
the claim: the same call asked again (on any instance, at the same moment) finds the use its
own, and its own start claim then keeps it to one execution. A claim found before its owner
is written is read again until it says whose it is (`OWNER_SETTLES_S`); one that never does
(its claimer died between the two writes) is nobody's, and the use is refused.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from hookgate.approvals.persistent import PersistentApprovals, StillPending
from hookgate.approvals.records import ConfirmationRequest
from hookgate.approvals.service import ApprovalAsk, ApprovalDecision
from hookgate.storage.ledger import DatabaseLedger
from hookgate.tools.ledger import PriorExecution

__all__ = ["OWNER_SETTLES_S", "ExternalApprovals"]

#: How long a claim of an approval's use may go without naming its owner before it is taken
#: for nobody's (its claimer writes the owner right after claiming).
OWNER_SETTLES_S = 2.0
#: How often such a claim is read again meanwhile.
_REREAD_S = 0.01


class ExternalApprovals:
    """An ApprovalService for one call asked from outside (a Claude Code hook, the v1 API)."""

    def __init__(self, approvals: PersistentApprovals, ledger: DatabaseLedger,
                 wait_s: float, *, owner: str | None = None) -> None:
        self.approvals = approvals
        self.ledger = ledger
        self.wait_s = wait_s
        #: The call id that owns the approval's use once it claimed it (the guarded-call
        #: API, whose own start claim keeps the call to one execution): the same call asked
        #: again finds its claim its own. None (Claude Code): a second claim is refused.
        self.owner = owner
        #: The request left pending by this call, if the wait ran out.
        self.pending: ConfirmationRequest | None = None
        #: The approved request this call used.
        self.used: ConfirmationRequest | None = None
        #: "approved by rule R, created by alice" when a standing rule approved this call.
        self.by_rule: str | None = None

    async def request_and_wait(self, ask: ApprovalAsk) -> ApprovalDecision:
        this_call = ask.binding
        earlier = await self._same_call(ask)
        if earlier is not None:
            ask = replace(ask, tool_call_id=earlier.tool_call_id)
        try:
            decision = await self.approvals.request_and_wait(ask, wait_s=self.wait_s)
        except StillPending as waiting:
            self.pending = waiting.request
            raise
        if earlier is not None and decision.binding == ask.binding:
            # The request was made for an earlier tool_use_id of this same call: same run
            # (session), agent, tool and argument digest (what _same_call matched), so its
            # decision is this call's. Anything else keeps its own binding, and the gate
            # refuses it.
            decision = replace(decision, binding=this_call)
        if decision.status != "approved" or decision.binding != this_call:
            # Checked before the claim: a decision that is not this exact call's (another
            # input sent under an approved tool_use_id) is refused by the gate, and the
            # approval stays unused for the call a person approved.
            return decision
        key = f"approval:{decision.request_id}"
        claimed = await self.ledger.claim(ask.run_id, key, ask.tool_name, ask.args_sha256)
        mine = None if self.owner is None else f"call:{self.owner}"
        if claimed is not None and mine is not None and claimed.observation is None:
            claimed = await self._settled(ask.run_id, key)
        if claimed is not None and (mine is None or claimed.observation != mine):
            # Nobody decided this refusal: the approval's decider is not named for it.
            return replace(decision, status="cancelled", decided_by=None, message=None,
                           reason="this approval was already used by one execution")
        if claimed is None and mine is not None:
            await self.ledger.finish(ask.run_id, key, mine, ok=True)
        if decision.rule_id is not None:
            self.by_rule = decision.reason  # no request: a standing rule approved it
        else:
            self.used = await self.approvals.store.get(decision.request_id)
        return decision

    async def _settled(self, run_id: str, key: str) -> PriorExecution | None:
        """The use's claim once its claimer has named the owner, or as it stands after
        `OWNER_SETTLES_S` (still naming nobody: refused)."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + OWNER_SETTLES_S
        while True:
            claimed = await self.ledger.recorded(run_id, key)
            if claimed is None or claimed.observation is not None or loop.time() >= give_up:
                return claimed
            await asyncio.sleep(_REREAD_S)

    async def _same_call(self, ask: ApprovalAsk) -> ConfirmationRequest | None:
        # The oldest pending or approved-and-unused request of this session for the same
        # tool and arguments: an identical retry waits on it rather than asking again.
        return await self.approvals.store.unused_same_call(
            ask.run_id, ask.agent.id, ask.tool_name, ask.args_sha256)
