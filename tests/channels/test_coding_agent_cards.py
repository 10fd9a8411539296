"""A coding agent's pending call names the coding agent and its working folder on the cards of
the newer channels too: one Claude Code hook call, routed at once to Teams, Telegram,
Discord and email (a real server on loopback, the platforms' fakes, a real SMTP server),
and each platform's message carries the "Coding agent: Claude Code in <folder>" line
(hookgate.channels.card_text.context_lines) beside the command and the rule that matched."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from hookgate.channels.teams.cards import card_texts
from hookgate.runtime.deployment import ChannelSpec
from tests.channels.test_e2e_email import SECRET
from tests.claude_code.scene import REASON, TOKEN, coder
from tests.fakes.discord import FakeDiscord
from tests.fakes.smtp import SmtpServer, body
from tests.fakes.teams import FakeTeams
from tests.fakes.telegram import FakeTelegram
from tests.live_server import live_server

pytestmark = pytest.mark.both_databases

FOLDER = "/work/claude-repo"
COMMAND = "echo c >> claude.log"
CALL = {"hook_event_name": "PreToolUse", "session_id": "s-claude", "cwd": FOLDER,
        "tool_name": "Bash", "tool_input": {"command": COMMAND}, "tool_use_id": "toolu_1",
        "permission_mode": "default"}
LINE = f"Coding agent: Claude Code in {FOLDER}"


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    with SmtpServer() as server:
        yield server


def arrived(probe: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.03)
    raise AssertionError(f"timed out waiting for {what}")


def test_teams_telegram_discord_and_email_name_the_coding_agent_and_its_folder(
        database_url: str, teams: FakeTeams, telegram: FakeTelegram, discord: FakeDiscord,
        smtp: SmtpServer, secrets_key: str) -> None:
    deployment = coder(wait_s=0.3)
    deployment.database_url = database_url
    mail = {"smtp_host": "127.0.0.1", "smtp_port": smtp.port, "starttls": False,
            "from_address": "hookgate@gate.example", "to": ["alice@acme.example"],
            "link_secret": SECRET,
            "callback_url": "https://gate.example/api/channels/ops-mail/callback"}
    deployment.channels = [
        ChannelSpec("ops-teams", "teams", "acme", teams.channel_config()),
        ChannelSpec("ops-telegram", "telegram", "acme", telegram.channel_config()),
        ChannelSpec("ops-discord", "discord", "acme", discord.channel_config()),
        ChannelSpec("ops-mail", "email", "acme", mail)]
    deployment.agents["coder"] = replace(
        deployment.agents["coder"], approval_channel_id="ops-teams",
        approval_channel_ids=("ops-telegram", "ops-discord", "ops-mail"))
    with live_server(deployment) as srv:
        r = httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "coder"},
                       json=CALL, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        assert r.status_code == 200, r.text

        [activity] = arrived(lambda: list(teams.activities.values()), "the Teams card")
        [message] = arrived(lambda: list(telegram.messages.values()), "the Telegram message")
        [post] = arrived(lambda: list(discord.messages.values()), "the Discord message")
        [letter] = smtp.inbox.wait(lambda: smtp.inbox.to("alice@acme.example"), "the email")
        assert activity.card is not None
        shown = {"Teams": card_texts(activity.card), "Telegram": message.text,
                 "Discord": post.content, "email": body(letter)}
        for platform, text in shown.items():
            for words in (LINE, COMMAND, REASON):
                assert words in text, (platform, words, text)
    assert teams.violations == [] and telegram.violations == []
    assert discord.violations == []
