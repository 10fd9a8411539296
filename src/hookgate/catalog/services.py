"""What catalog hooks may need from the running system, handed to them at build time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hookgate.approvals.service import ApprovalService


@dataclass
class HookServices:
    """Shared services for the hooks of every session in one process.

    ``approvals`` backs the approval gate; without it the gate blocks every call that needs
    a person (fail closed). ``database`` backs the hooks that keep records (audit log,
    read-only flag, rate-limit counters). ``extra`` is for third-party hooks.
    """

    approvals: ApprovalService | None = None
    database: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
