"""An agent's rules for guarded calls are read once for as long as its section is the same:
a section changed in place (value or type), or a rule's mode stamped by a reload, is read
again at the next call; an unchanged one gives the same rules back."""

from __future__ import annotations

import pytest

from hookgate import Agent, HookBuildError
from hookgate.external.policy import CallRules

SECTION = "guarded_calls"


def read(agent: Agent) -> CallRules:
    return CallRules.read(agent, SECTION, default_wait_s=0.0)


def test_a_section_changed_in_place_is_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    rule = {"matcher": "pay", "requires_confirmation": True}
    agent = Agent(id="buyer", name="Buyer", instructions="", tools=[],
                  model_config_json={SECTION: {"rules": [rule]}})
    first = read(agent)
    assert read(agent) is first

    rule["matcher"] = "send"
    assert str(read(agent).rules[0].matcher) == "send"

    agent.model_config_json[SECTION]["wait_s"] = 1
    assert read(agent).wait_s == 1.0
    agent.model_config_json[SECTION]["wait_s"] = True  # equal to 1, but not a number
    with pytest.raises(HookBuildError, match="wait_s"):
        read(agent)
    del agent.model_config_json[SECTION]["wait_s"]

    rule["writes"] = "yes"
    with pytest.raises(HookBuildError, match="'writes' must be true or false"):
        read(agent)
    rule["writes"] = False
    assert read(agent).rules[0].writes is False

    # A mode stamped by `hookgate policy reload` holds from the next read on, and back.
    from hookgate.policies import modes

    monkeypatch.setattr(modes, "live_mode", lambda entry: "shadow")
    # As a reload does: the stamped modes are another version of the modes in force (the
    # rules' modes are read again when it changes; tests/policies/test_mode_reload.py
    # stamps a real file).
    monkeypatch.setattr(modes, "modes_version", lambda: "modes-stamped")
    shadowed = read(agent)
    assert [r.mode for r in shadowed.rules] == ["shadow"]
    assert read(agent) is shadowed
    monkeypatch.undo()
    assert [r.mode for r in read(agent).rules] == ["enforce"]


def test_each_agent_and_section_reads_its_own_rules() -> None:
    config = {SECTION: {"rules": [{"matcher": "pay", "requires_confirmation": True}]},
              "claude_code": {"rules": [{"matcher": "Bash", "requires_confirmation": True}]}}
    one = Agent(id="one", name="One", instructions="", tools=[], model_config_json=config)
    two = Agent(id="two", name="Two", instructions="", tools=[], model_config_json=config)

    assert "agent 'one'" in read(one).rules[0].described
    assert "agent 'two'" in read(two).rules[0].described
    assert str(CallRules.read(one, "claude_code", default_wait_s=0.0).rules[0].matcher) == "Bash"
    assert read(one).wait_s == 0.0
    assert CallRules.read(one, SECTION, default_wait_s=5.0).wait_s == 5.0
