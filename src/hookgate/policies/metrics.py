"""The policy sets' metrics: every load of a changed set by outcome, and how many sets of
this process are serving an older set because their files do not load."""

from __future__ import annotations

from typing import Literal

from hookgate.telemetry.switch import SWITCH, meter

#: Loads of a changed policy set, by outcome (``hookgate.policy.outcome``).
M_LOADS = "hookgate.policy.loads"
#: Policy sets whose files do not load, so that an older set stays in force (0 when none).
M_FAILING = "hookgate.policy.sets_failing"
OUTCOME = "hookgate.policy.outcome"
PATH = "hookgate.policy.path"

#: ``loaded``: in force; ``failed``: the stamped files do not load (the previous set stays);
#: ``not_stamped``: the files changed without ``hookgate policy reload`` (not taken).
Outcome = Literal["loaded", "failed", "not_stamped"]


def load_counted(path: str, outcome: Outcome) -> None:
    """Count one look at a changed set."""
    if SWITCH.on:
        meter().create_counter(
            M_LOADS, unit="{load}", description="Loads of changed Cedar policy sets, by "
            "outcome.").add(1, {OUTCOME: outcome, PATH: path})


def failing_changed(path: str, delta: int) -> None:
    """A set began (+1) or stopped (-1) serving an older set because its files fail."""
    if SWITCH.on:
        meter().create_up_down_counter(
            M_FAILING, unit="{policy_set}", description="Cedar policy sets whose files do "
            "not load, so that an older set stays in force.").add(delta, {PATH: path})


#: What rules in shadow mode would have decided, per rule and verdict (policies/shadow.py).
M_SHADOW = "hookgate.policy.shadow.decisions"
SHADOW_RULE = "hookgate.policy.shadow.rule"
#: ``would_allow``, ``would_deny`` or ``would_ask``.
SHADOW_VERDICT = "hookgate.policy.shadow.verdict"


def shadow_counted(rule: str, effect: str) -> None:
    """Count one shadow decision: ``rule`` would have given ``effect`` (allow, deny, ask)."""
    if SWITCH.on:
        meter().create_counter(
            M_SHADOW, unit="{decision}", description="What rules in shadow mode would have "
            "decided, per rule: would_allow, would_deny or would_ask.").add(
                1, {SHADOW_RULE: rule, SHADOW_VERDICT: f"would_{effect}"})
