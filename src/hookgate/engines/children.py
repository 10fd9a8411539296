"""Child runs that wait with their root: a delegate (``call_agent``) or a workflow's agent
node whose call waits for a person parks the stored run it runs inside.

The child's state is kept in its parent's state (``extra["children"]``, keyed by the slot
it runs in: the parent's call id for a delegate, the node for a workflow), so the root's
checkpoint carries the whole tree and nothing waits in memory. The request names the root
(``root_run_id``); its decision continues the root, which re-enters the parent's call
(past the hooks that admitted it) and resumes the child from its stored state: every call
of the child keeps its own ledger entry, so nothing runs twice.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from hookgate.engines.state import RunState

CHILDREN_KEY = "children"

#: The id of the call whose tool is running in this task (set by the driver around each
#: guarded call): how ``call_agent`` knows which slot of its parent it runs in.
CURRENT_CALL: ContextVar[str | None] = ContextVar("hookgate_current_call", default=None)


def call_slot(call_id: str) -> str:
    return f"call:{call_id}"


def node_slot(node_id: str) -> str:
    return f"node:{node_id}"


def parked_child(parent: RunState, slot: str) -> dict[str, Any] | None:
    """The child parked in ``slot`` of ``parent`` ({"args", "state"}), or None."""
    children = parent.extra.get(CHILDREN_KEY)
    entry = children.get(slot) if isinstance(children, dict) else None
    return entry if isinstance(entry, dict) and isinstance(entry.get("state"), dict) else None


def park_child(parent: RunState, slot: str, child: RunState, args: dict[str, Any]) -> None:
    """Keep ``child`` (parking) in ``parent``'s state; the parent's checkpoint stores it."""
    parent.extra.setdefault(CHILDREN_KEY, {})[slot] = {
        "args": args, "state": child.model_dump(mode="json")}


def release_child(parent: RunState, slot: str) -> None:
    """The child in ``slot`` ended (or never parked): nothing of it is kept any more."""
    children = parent.extra.get(CHILDREN_KEY)
    if isinstance(children, dict):
        children.pop(slot, None)
        if not children:
            parent.extra.pop(CHILDREN_KEY, None)


def parked_run_ids(state: RunState) -> set[str]:
    """The run ids of every child parked in ``state``, at any depth."""
    found: set[str] = set()
    pending = [state.extra]
    while pending:
        children = pending.pop().get(CHILDREN_KEY)
        if not isinstance(children, dict):
            continue
        for entry in children.values():
            child = entry.get("state") if isinstance(entry, dict) else None
            if isinstance(child, dict):
                if isinstance(child.get("run_id"), str):
                    found.add(child["run_id"])
                extra = child.get("extra")
                if isinstance(extra, dict):
                    pending.append(extra)
    return found
