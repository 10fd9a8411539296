"""The configuration keys of four eyes and quorum: ``allow_self_approval`` and
``approval_quorum`` on an agent, parsed into the Agent; a matcher or ``when`` that does not
parse, a quorum nobody could reach and unknown keys are refused with the key named."""

from __future__ import annotations

from typing import Any

import pytest

from hookgate.approvals.quorum import requirement_for
from hookgate.approvals.service import ApprovalAsk
from hookgate.config import ConfigError, parse_config


def _doc(**agent: Any) -> dict[str, Any]:
    return {
        "orgs": [{"id": "acme"}],
        "models": {"m": {"type": "scripted", "turns": [{"answer": "ok"}]}},
        "agents": [{"id": "buyer", "org": "acme", "model": "m",
                    "confirmation_approver_scope": "org_members", **agent}],
    }


def _ask(agent: Any, amount: Any) -> ApprovalAsk:
    args = {"amount": amount}
    return ApprovalAsk(agent=agent, run_id="r", tool_call_id="c", tool_name="pay", args=args,
                       args_sha256="x", user_id="alice", org_id="acme")


def test_quorum_and_four_eyes_keys_build_the_agents_requirement() -> None:
    config = parse_config(_doc(allow_self_approval=False, approval_quorum=[
        {"matcher": "pay", "when": "args.amount > 500000", "approvals_required": 2},
        {"matcher": "pay", "when": "args.amount > 5000000", "approvals_required": 3}]),
        env={})
    agent = config.build_agent("buyer")
    assert agent.allow_self_approval is False
    small, big, huge = (requirement_for(_ask(agent, a)) for a in (10, 600000, 6000000))
    assert (small.approvals_required, small.allow_self_approval) == (1, False)
    assert big.approvals_required == 2 and huge.approvals_required == 3
    # A condition that cannot be evaluated picks the call: the stricter requirement holds.
    broken = requirement_for(_ask(agent, "lots"))
    assert broken.approvals_required == 3
    assert any("could not be evaluated" in r for r in broken.reasons)


@pytest.mark.parametrize(("agent", "words"), [
    ({"approval_quorum": [{"matcher": "pay", "when": "args.amount >"}]}, "not a valid"),
    ({"approval_quorum": [{"when": "os.system('x')"}]}, "unknown names"),
    ({"approval_quorum": [{"approvals_required": 0}]}, "approvals_required"),
    ({"approval_quorum": [{"approvals_required": 99}]}, "approvals_required"),
    ({"approval_quorum": [{"quorum": 2}]}, "unknown key 'quorum'"),
    ({"confirmation_approver_scope": "initiator", "allow_self_approval": False},
     "leaves nobody who may approve"),
    ({"confirmation_approver_scope": "agent_owner", "approval_quorum": [{}]},
     "needs confirmation_approver_scope 'org_members'"),
    ({"allow_self_aproval": False}, "did you mean 'allow_self_approval'"),
])
def test_bad_quorum_declarations_are_refused(agent: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        parse_config(_doc(**agent), env={})
