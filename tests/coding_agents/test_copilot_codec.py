"""Copilot CLI's hook input in hookgate's words, as the real CLI sends it (checked against
``copilot -p`` 1.0.102): ``bash`` is the shell tool ``Bash`` (without the model's
``description``), an MCP tool ``srv-echo`` is ``mcp__srv__echo``, and an input hookgate
cannot act on is refused with the reason."""

from __future__ import annotations

import json

import pytest

from hookgate.coding_agents.codec import BadHookInput, Event, Outcome
from hookgate.coding_agents.copilot import CopilotCodec

PRE = {"sessionId": "af70868a-e845-44ca-a883-cd2337047a89", "timestamp": 1796544183629,
       "cwd": "/work/project", "toolName": "bash",
       "toolArgs": {"command": "git push origin main", "description": "push"}}


def test_the_shell_and_mcp_tools_get_hookgates_names() -> None:
    hook = CopilotCodec("preToolUse").parse(PRE)
    # The model's description of the command is not part of the call.
    assert (hook.event, hook.tool_name, hook.arguments, hook.call_id) == (
        Event.PRE_TOOL_USE, "Bash", {"command": "git push origin main"}, None)
    assert hook.facts == {"copilot_event": "preToolUse", "copilot_tool_name": "bash"}
    for copilot, hookgate in [("srv-echo", "mcp__srv__echo"),
                              ("github-mcp-server-get_issue", "mcp__github-mcp-server__get_issue"),
                              ("view", "view"), ("read_bash", "read_bash")]:
        hook = CopilotCodec("preToolUse").parse({**PRE, "toolName": copilot,
                                                 "toolArgs": {"text": "hi"}})
        assert hook.tool_name == hookgate


@pytest.mark.parametrize(("event", "body", "word"), [
    ("stop", PRE, "event"),
    ("preToolUse", {**PRE, "sessionId": ""}, "sessionId"),
    ("preToolUse", {**PRE, "toolArgs": "git push"}, "toolArgs"),
    ("preToolUse", {**PRE, "cwd": None}, "cwd"),
    ("preToolUse", {**PRE, "toolArgs": {"description": "no command"}}, "command"),
])
def test_an_input_hookgate_cannot_act_on_is_refused_with_the_reason(
        event: str, body: dict[str, object], word: str) -> None:
    with pytest.raises(BadHookInput, match=word):
        CopilotCodec(event).parse(body)


def test_the_answers_are_exactly_copilots() -> None:
    pre = CopilotCodec("preToolUse")
    assert pre.render(Event.PRE_TOOL_USE, Outcome()).body == "{}"
    allowed = pre.render(Event.PRE_TOOL_USE, Outcome(approved="approved by alice"))
    assert allowed.body == ('{"permissionDecision":"allow",'
                            '"permissionDecisionReason":"approved by alice"}')
    denied = pre.render(Event.PRE_TOOL_USE, Outcome(refused="no\npushes"))
    assert (denied.status, denied.body) == (
        200, '{"permissionDecision":"deny","permissionDecisionReason":"no pushes"}')
    post = CopilotCodec("postToolUse").render(Event.POST_TOOL_USE, Outcome(replaced="[x]"))
    assert json.loads(post.body) == {"modifiedResult": {"resultType": "success",
                                                        "textResultForLlm": "[x]"}}
    start = CopilotCodec("sessionStart").render(Event.SESSION_START, Outcome(context="ctx"))
    assert json.loads(start.body) == {"additionalContext": "ctx"}
