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


async def keep(ledger: DatabaseLedger, run_id: str, call_id: str, tool_name: str,
               args_sha256: str, decision: CallDecision) -> None:
    """Record ``decision`` for this call; the first record of a call id stays (a re-used
    tool_use_id does not rewrite who decided the earlier call)."""
    key = Entry(EntryKind.DECISION, (call_id,)).key
    if await ledger.claim(run_id, key, tool_name, args_sha256) is None:
        text = json.dumps({"approver": decision.approver, "request_id": decision.request_id,
                           "wait_us": decision.wait_us})
        await ledger.finish(run_id, key, text, ok=True)


async def kept(ledger: DatabaseLedger, run_id: str, call_id: str, tool_name: str,
               args_sha256: str) -> CallDecision | None:
    """The decision kept for this exact call (same tool and arguments), or None."""
    prior = await ledger.recorded(run_id, Entry(EntryKind.DECISION, (call_id,)).key)
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
