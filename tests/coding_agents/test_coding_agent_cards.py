"""A coding agent's pending call reads the same for every agent wherever a person decides
it: the Slack card, the inbox's JSON and the inbox page in a real headless Chromium name the
coding agent (Claude Code, Codex, Cursor), its working folder, the command and the rule that
matched — captured once, when the request is made (hookgate.approvals.context)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hookgate.runtime.deployment import ChannelSpec
from tests.claude_code.scene import REASON, TOKEN, coder
from tests.fakes.slack import FakeSlack, block_texts
from tests.live_server import LiveServer, live_server
from tests.portal.browser import chromium, console_errors
from tests.portal.test_portal_browser import Portal

RULE = "gate rule claude_code.rules[0] of agent 'coder'"
#: One gated call per agent, each from its own folder, as its hook sends it.
CALLS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "Claude Code": ("/api/claude-code/hooks", "/work/claude-repo", {
        "hook_event_name": "PreToolUse", "session_id": "s-claude", "cwd": "/work/claude-repo",
        "tool_name": "Bash", "tool_input": {"command": "echo c >> claude.log"},
        "tool_use_id": "toolu_1", "permission_mode": "default"}),
    "Codex": ("/api/codex/hooks", "/work/codex-repo", {
        "hook_event_name": "PreToolUse", "session_id": "s-codex", "cwd": "/work/codex-repo",
        "tool_name": "exec_command", "tool_input": {"cmd": "echo a >> codex.log"},
        "tool_use_id": "call_1"}),
    "Cursor": ("/api/cursor/hooks", "/work/cursor-repo", {
        "hook_event_name": "preToolUse", "conversation_id": "c-cursor", "cwd": "",
        "workspace_roots": ["/work/cursor-repo"], "tool_name": "Shell",
        "tool_input": {"command": "echo b >> cursor.log", "cwd": "", "timeout": 30000},
        "tool_use_id": "t-1"}),
}


@pytest.fixture
def pending(database_url: str, slack: FakeSlack, secrets_key: str) -> Iterator[LiveServer]:
    """A server with one pending request per coding agent of CALLS."""
    deployment = coder(wait_s=0.3)
    deployment.database_url = database_url
    deployment.channels = [ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())]
    with live_server(deployment) as srv:
        for route, _, body in CALLS.values():
            r = httpx.post(f"{srv.url}{route}", params={"agent": "coder"}, json=body,
                           headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
            assert "pending" in r.text or "hookgate" in r.text, r.text
        yield srv


def _requests(srv: LiveServer) -> dict[str, dict[str, Any]]:
    r = httpx.get(f"{srv.url}/api/confirmations", headers={"Authorization": f"Bearer {TOKEN}"})
    return {req["context"]["coding_agent"]["name"]: req for req in r.json()}


@pytest.mark.both_databases
def test_cards_and_the_inbox_json_name_the_agent_folder_command_and_rule(
        pending: LiveServer, slack: FakeSlack) -> None:
    requests = _requests(pending)
    assert set(requests) == set(CALLS)
    for name, (_, folder, _body) in CALLS.items():
        request = requests[name]
        assert request["context"]["coding_agent"] == {
            "kind": name.lower().replace(" ", "-"), "name": name, "cwd": folder}
        command = request["payload"]["args"]["command"]
        assert request["payload"]["tool_name"] == "Bash" and ".log" in command
        [why] = [r["text"] for r in request["context"]["reasons"]]
        assert RULE in why and REASON in why
        [card] = [block_texts(m.blocks or []) for m in slack.messages.values()
                  if command in block_texts(m.blocks or [])]
        for words in (f"Coding agent: {name} in {folder}", command, RULE, REASON):
            assert words in card, (words, card)


def test_the_inbox_page_names_the_agent_folder_command_and_rule(pending: LiveServer) -> None:
    with chromium() as driver:
        page = Portal(driver, pending)
        page.open()
        page.until("the sign-in form", lambda: page.find("#token")).send_keys(TOKEN)
        page.find("form.signin button[type=submit]").click()
        for name, (_, folder, body) in CALLS.items():
            command = str(body["tool_input"].get("cmd") or body["tool_input"]["command"])
            card = page.sees("#waiting", f"{name} in {folder}")
            text = page.text("#waiting")
            for words in ("Coding agent", command, RULE, REASON):
                assert words in text, (words, text)
            assert card is not None
        assert console_errors(driver) == []


def test_every_platforms_card_names_the_coding_agent_and_its_folder() -> None:
    import json
    from datetime import UTC, datetime

    from hookgate.channels.feishu import cards as feishu
    from hookgate.channels.masking import DEFAULT_SECRET_PATTERNS
    from hookgate.channels.slack import blocks as slack_blocks
    from hookgate.channels.wecom import cards as wecom
    from tests.channels.conftest import approval_card

    now = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
    context = {"reasons": [{"kind": "gate_rule", "text": f"{RULE}: {REASON}"}],
               "coding_agent": {"kind": "cursor", "name": "Cursor", "cwd": "/work/repo"}}
    card = approval_card(context=context)
    for built, rule in (
            (feishu.approval_card(card, now=now, patterns=DEFAULT_SECRET_PATTERNS), RULE),
            (slack_blocks.approval_blocks(card, now=now, patterns=DEFAULT_SECRET_PATTERNS),
             RULE),
            # WeCom's rows hold 26 characters: the rule's start, the whole of it in the inbox.
            (wecom.approval_card(card, now=now, patterns=DEFAULT_SECRET_PATTERNS),
             "gate rule claude_code")):
        text = json.dumps(built, ensure_ascii=False)
        assert "Cursor in /work/repo" in text and rule in text, text
