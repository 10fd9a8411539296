"""What the running system hands to hooks at build time: a plain value every layer may pass.

It lives with the hook model so that the engines, which build registries, need nothing above them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class HookServices:
    """Shared services for the hooks of every session in one process.

    ``approvals`` backs the approval gate: a ``hookgate.approvals.ApprovalService`` (typed
    loosely here because the hook model imports nothing else from hookgate; the gate types
    it); without it the gate blocks every call that needs a person (fail closed).
    ``database`` backs the hooks that keep records (audit log, read-only flag, rate-limit
    counters). ``extra`` is for third-party hooks.
    """

    approvals: Any = None
    database: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
