"""Why a policy set cannot be used: the file, the line and the policy at fault."""

from __future__ import annotations


class PolicyLoadError(Exception):
    """A policy file or folder that does not load, parse or validate.

    ``str(error)`` reads ``policies/pay.cedar:12: policy 'big-payments': <problem>``; further
    problems found in the same pass follow on their own lines.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class PolicyEvaluationError(Exception):
    """A call's facts cannot be put to the Cedar engine (a value Cedar cannot hold exactly)."""
