"""Approvals for calls that run outside hookgate: bounded waits, one execution per approval.

A Claude Code hook (or a guarded-call API request) cannot hold a call for hours, so the
gate waits ``wait_s`` and then leaves the request pending (StillPending). An approval
covers its own call id only (hookgate.hooks.coverage): the same call asked again under the
same id — the same ``tool_use_id`` after ``claude -p --resume``, the same ``call_id`` of
the guarded-call API — finds its request; another call id with the same tool and arguments
is another call and gets a request of its own. The one exception is the path built with
``retry=RetryReuse.IDENTICAL_CALL_AFTER_GIVE_UP`` (Claude Code in interactive mode, which
is told to "make the identical call again" and does so under a new ``tool_use_id``): when
this call's wait runs out its request is marked given up (`ApprovalUse.GAVE_UP`), and an
identical call of the same session with no request of its own joins that request. Where a
call runs is part of it: the working directory a call id was first asked from (Claude
Code's ``cwd``) is kept, and `hookgate.hooks.coverage.coverage` compares it (`Places`) with
where a call is asked from: the same call id asked from elsewhere is refused, and a retry
from elsewhere joins nothing (``rm -rf build`` sent again from another directory is another
call). An approval is used by exactly one execution: its use is claimed in the execution
ledger (the typed key `ApprovalEntry(ApprovalUse.USE, request id)`), and a second claim
finds it taken (a retry that loses the claim asks again under its own id). The binding is
compared before the claim, so a mismatched call never uses up an approval.

For the guarded-call API the claim names the call id that owns the use, written right after
the claim: the same call asked again (on any instance, at the same moment) finds the use its
own, and its own start claim then keeps it to one execution. A claim found before its owner
is written is read again until it says whose it is (`OWNER_SETTLES_S`); one that never does
(its claimer died between the two writes) is nobody's, and the use is refused.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

from hookgate.approvals.persistent import PersistentApprovals, StillPending
from hookgate.approvals.records import ConfirmationRequest
from hookgate.approvals.service import ApprovalAsk, ApprovalDecision
from hookgate.external.keys import Entry, EntryKind
from hookgate.hooks.coverage import Coverage, Places, RetryReuse, coverage
from hookgate.storage.confirmations import ApprovalEntry, ApprovalUse
from hookgate.storage.ledger import DatabaseLedger
from hookgate.tools.ledger import PriorExecution

__all__ = ["OWNER_SETTLES_S", "ExternalApprovals"]

#: How long a claim of an approval's use may go without naming its owner before it is taken
#: for nobody's (its claimer writes the owner right after claiming).
OWNER_SETTLES_S = 2.0
#: How often such a claim is read again meanwhile.
_REREAD_S = 0.01
#: The call's metadata naming where it runs (Claude Code's working directory): part of
#: what an identical retry must match.
PLACE_KEY = "cwd"


class ExternalApprovals:
    """An ApprovalService for one call asked from outside (a Claude Code hook, the v1 API)."""

    def __init__(self, approvals: PersistentApprovals, ledger: DatabaseLedger,
                 wait_s: float, *, owner: str | None = None,
                 retry: RetryReuse | None = None) -> None:
        self.approvals = approvals
        self.ledger = ledger
        self.wait_s = wait_s
        #: The call id that owns the approval's use once it claimed it (the guarded-call
        #: API, whose own start claim keeps the call to one execution): the same call asked
        #: again finds its claim its own. None (Claude Code): a second claim is refused.
        self.owner = owner
        #: None: an approval covers this call id only. `RetryReuse.IDENTICAL_CALL_AFTER_GIVE_UP`
        #: (only for a client told to make the identical call again under a new id): a call
        #: may join an identical call's request that gave up waiting.
        self.retry = retry
        #: The request left pending by this call, if the wait ran out.
        self.pending: ConfirmationRequest | None = None
        #: The approved request this call used.
        self.used: ConfirmationRequest | None = None
        #: "approved by rule R, created by alice" when a standing rule approved this call.
        self.by_rule: str | None = None

    async def request_and_wait(self, ask: ApprovalAsk) -> ApprovalDecision:
        moved = await self._moved(ask)
        if moved is not None:
            return ApprovalDecision(request_id="", status="cancelled",
                                    args_sha256=ask.args_sha256, reason=moved,
                                    binding=ask.binding)
        decision = await self._decision(ask, self.retry)
        if decision.retry is not None and not (await self._covers(ask, decision)).covered:
            # Joined as a retry, but not the identical call (asked from another place than
            # the call that gave up): it asks under its own id.
            decision = await self._decision(ask, None)
        if decision.status != "approved" or not (await self._covers(ask, decision)).covered:
            # Checked before the claim: a decision that is not this exact call's (another
            # input sent under an approved tool_use_id) is refused by the gate, and the
            # approval stays unused for the call a person approved.
            return decision
        claimed = await self._claim_use(ask, decision)
        if claimed is not None and decision.retry is not None:
            # Joined as a retry, but another identical call used the approval first: this
            # call is not that one, and asks under its own id.
            decision = await self._decision(ask, None)
            if decision.status != "approved" or not (
                    await self._covers(ask, decision)).covered:
                return decision
            claimed = await self._claim_use(ask, decision)
        if claimed is not None:
            # Nobody decided this refusal: the approval's decider is not named for it.
            return replace(decision, status="cancelled", decided_by=None, message=None,
                           reason="this approval was already used by one execution")
        if decision.rule_id is not None:
            self.by_rule = decision.reason  # no request: a standing rule approved it
        else:
            self.used = await self.approvals.store.get(decision.request_id)
        return decision

    async def _covers(self, ask: ApprovalAsk, decision: ApprovalDecision) -> Coverage:
        """Whether ``decision``'s approval covers ``ask``'s call (hookgate.hooks.coverage),
        with the places of both on a path whose calls run somewhere."""
        approved = decision.binding
        places = None
        if PLACE_KEY in ask.metadata and approved is not None:
            here = _place(ask.metadata)
            # This call id's own place was checked on entry (`_moved`): it is here.
            there = here if approved.tool_call_id == ask.tool_call_id else (
                await self._place_of(ask, approved.tool_call_id))
            places = Places(there, here)
        return coverage(approved, ask.binding, retry=decision.retry, places=places)

    async def _decision(self, ask: ApprovalAsk, retry: RetryReuse | None
                        ) -> ApprovalDecision:
        try:
            return await self.approvals.request_and_wait(ask, wait_s=self.wait_s, retry=retry)
        except StillPending as waiting:
            self.pending = waiting.request
            if self.retry is not None:
                # This call's client is told to make the identical call again (under a new
                # id): that retry may join the request (see RetryReuse).
                key = ApprovalEntry(ApprovalUse.GAVE_UP, waiting.request.id).key
                if await self.ledger.claim(ask.run_id, key, ask.tool_name,
                                           ask.args_sha256) is None:
                    await self.ledger.finish(ask.run_id, key, ask.tool_call_id, ok=True)
            raise

    async def _moved(self, ask: ApprovalAsk) -> str | None:
        """Why ``ask`` is not the call its id named (it is asked from another place than
        that call id first was), else None; the first ask of a call id records its place."""
        if PLACE_KEY not in ask.metadata:
            return None
        entry = Entry(EntryKind.PLACE, (ask.tool_call_id,))
        here = json.dumps({"place": _place(ask.metadata)})
        if await self.ledger.claim(ask.run_id, entry.key, ask.tool_name, "") is None:
            await self.ledger.finish(ask.run_id, entry.key, here, ok=True)
            return None
        # An approval of this very call, given where its id was first asked from.
        cover = coverage(ask.binding, ask.binding, places=Places(
            await self._place_of(ask, ask.tool_call_id), _place(ask.metadata)))
        return None if cover.covered else f"{cover.reason}, so it does not run"

    async def _place_of(self, ask: ApprovalAsk, call_id: str) -> str | None:
        """Where call ``call_id`` of ``ask``'s run was first asked from (None: unknown)."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + OWNER_SETTLES_S
        key = Entry(EntryKind.PLACE, (call_id,)).key
        while True:
            record = await self.ledger.recorded(ask.run_id, key)
            if record is None or record.observation is not None or loop.time() >= give_up:
                break
            await asyncio.sleep(_REREAD_S)
        try:
            held = json.loads(record.observation or "") if record is not None else None
        except ValueError:
            return None
        place = held.get("place") if isinstance(held, dict) else None
        return place if isinstance(place, str) else None

    async def _claim_use(self, ask: ApprovalAsk, decision: ApprovalDecision
                         ) -> PriorExecution | None:
        """None when this call claimed the approval's use (or it was already its own);
        the claim of the call that used it otherwise."""
        entry = ApprovalEntry(ApprovalUse.USE, decision.request_id)
        mine = None if self.owner is None else f"call:{self.owner}"
        for earlier in entry.keys_used[1:]:
            # A use recorded before the keys were typed still counts.
            used = await self.ledger.recorded(ask.run_id, earlier)
            if used is not None and (mine is None or used.observation != mine):
                return used
        key = entry.key
        claimed = await self.ledger.claim(ask.run_id, key, ask.tool_name, ask.args_sha256)
        if claimed is not None and mine is not None and claimed.observation is None:
            claimed = await self._settled(ask.run_id, key)
        if claimed is not None and (mine is None or claimed.observation != mine):
            return claimed
        if claimed is None and mine is not None:
            await self.ledger.finish(ask.run_id, key, mine, ok=True)
        return None

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


def _place(metadata: dict[str, Any]) -> str | None:
    place = metadata.get(PLACE_KEY)
    return place if isinstance(place, str) else None
