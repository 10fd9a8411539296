"""A quorum rule as the configuration states it: which calls need how many distinct approvers.

Apart from the vote counting (``quorum``) so that reading a configuration does not import
the database layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from hookgate.matching import Condition, ToolMatcher

#: The most approvals a rule may ask for (a quorum nobody can reach is a stuck request).
MAX_APPROVALS = 20


@dataclass(frozen=True, slots=True)
class QuorumRule:
    """Calls matching ``matcher`` (and ``when``) need ``approvals_required`` distinct
    approvers; ``allow_self_approval`` False also keeps their requester from approving."""

    matcher: ToolMatcher
    when: Condition | None = None
    approvals_required: int = 2
    allow_self_approval: bool | None = None

    @classmethod
    def parse(cls, matcher: str, when: str | None, approvals_required: int,
              allow_self_approval: bool | None) -> QuorumRule:
        """From the configuration's strings; HookBuildError names a bad matcher or when."""
        return cls(ToolMatcher.parse(matcher), Condition(when) if when is not None else None,
                   approvals_required, allow_self_approval)

    def describe(self) -> str:
        what = f"'{self.matcher}'" + (f" when {self.when}" if self.when else "")
        return f"the agent's quorum rule for {what}"
