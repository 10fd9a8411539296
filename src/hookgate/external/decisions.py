"""Who decided an external call, kept from its PreToolUse for its PostToolUse: the tool runs
outside hookgate (Claude Code, a framework) between the two, so the audit row written at
PostToolUse reads the gate's decision from the execution ledger (a `EntryKind.DECISION`
entry of the call id).
"""

from __future__ import annotations

import json

from hookgate.external.keys import Entry, EntryKind
from hookgate.storage.ledger import DatabaseLedger
from hookgate.tools.calls import CallDecision
from hookgate.tools.ledger import PriorExecution


async def keep(ledger: DatabaseLedger, run_id: str, call_id: str, tool_name: str,
               args_sha256: str, decision: CallDecision) -> None:
    """Record ``decision`` for this call; the first record of a call id stays (a re-used
    tool_use_id does not rewrite who decided the earlier call)."""
    # Claimed with its record: one write (a claim never left without its record).
    await ledger.claim_finished(run_id, key(call_id), tool_name, args_sha256, json.dumps(
        {"approver": decision.approver, "request_id": decision.request_id,
         "wait_us": decision.wait_us}), ok=True)


def key(call_id: str) -> str:
    """The ledger entry (of the call's run) a call's decision is kept under."""
    return Entry(EntryKind.DECISION, (call_id,)).key


async def kept(ledger: DatabaseLedger, run_id: str, call_id: str, tool_name: str,
               args_sha256: str) -> CallDecision | None:
    """The decision kept for this exact call (same tool and arguments), or None."""
    return kept_in(await ledger.recorded(run_id, key(call_id)), tool_name, args_sha256)


def kept_in(prior: PriorExecution | None, tool_name: str, args_sha256: str
            ) -> CallDecision | None:
    """The decision a record of the call's `key` holds for this exact call (same tool and
    arguments), or None."""
    if prior is None or prior.observation is None or (
            prior.tool_name, prior.args_sha256) != (tool_name, args_sha256):
        return None
    try:
        held = json.loads(prior.observation)
    except ValueError:
        return None
    wait = held.get("wait_us")
    return CallDecision(_text(held.get("approver")), _text(held.get("request_id")),
                        wait if isinstance(wait, int) and not isinstance(wait, bool) else None)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
