"""Edits and messages on every chat card, end to end: a real server, each platform's fake
API, a decision made in the inbox (where arguments are edited; the card links there), and
the card's decided state showing what was changed — secret values masked — and the words
the approver gave the model."""

from __future__ import annotations

import json

from hookgate.channels.card_text import INBOX_LINK
from hookgate.runtime.deployment import ChannelSpec
from tests.channels.world import API_TOKEN, eventually, waiting_run
from tests.fakes.feishu import FakeFeishu, buttons_of, card_text
from tests.fakes.slack import FakeSlack, block_texts
from tests.fakes.wecom import FakeWeCom

NEW_TOKEN = "sk-live-rotated-42"
EDIT = {"amount": 40000, "vendor": "ACME GMBH", "api_token": NEW_TOKEN}
MESSAGE = "Paying 40,000 now; the rest after delivery."
EDITED_LINE = ('Approved with edits: amount: 60000.0 → 40000.0; api_token: "••••" → "••••"')


async def test_feishu_links_to_the_edit_and_its_decided_card_shows_it(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    specs = [ChannelSpec("ops-feishu", "feishu", "acme", feishu.channel_config())]
    async with waiting_run(database_url, specs, "ops-feishu", feishu.cards) as scene:
        assert INBOX_LINK in json.dumps(feishu.cards()[0], ensure_ascii=False)
        await scene.decide_in_inbox("approve", arguments=EDIT, message=MESSAGE)
        assert (await scene.finished())["status"] == "completed"
        assert scene.bank.transfers == [{"amount": 40000.0, "vendor": "ACME GMBH"}]
        [message] = feishu.messages.values()
        await eventually(lambda: message.patches, "the card's update")
        assert buttons_of(message.content) == []
        text = card_text(message.content)
        assert "Approved by alice via the web inbox" in text
        assert EDITED_LINE in text and f"Message to the agent: {MESSAGE}" in text
        assert NEW_TOKEN not in json.dumps(message.content) and API_TOKEN not in text
    assert feishu.violations == []


async def test_slack_shows_a_rejection_message_on_the_decided_message(
        database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    specs = [ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())]
    async with waiting_run(database_url, specs, "ops-slack", lambda: slack.messages) as scene:
        [message] = slack.messages.values()
        assert INBOX_LINK in json.dumps(message.blocks, ensure_ascii=False)
        await scene.decide_in_inbox("reject", "not in this quarter's budget",
                                    message="Ask finance to split the payment.")
        assert (await scene.finished())["status"] == "completed"
        assert scene.bank.transfers == []
        await eventually(lambda: message.updates, "chat.update")
        shown = block_texts(message.blocks or [])
        assert "Rejected by alice via the web inbox" in shown
        assert "Reason: not in this quarter's budget" in shown
        assert "Message to the agent: Ask finance to split the payment." in shown
        assert "Approved with edits" not in shown
    assert slack.violations == []


async def test_slack_shows_the_edits_on_the_decided_message(
        database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    specs = [ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())]
    async with waiting_run(database_url, specs, "ops-slack", lambda: slack.messages) as scene:
        await scene.decide_in_inbox("approve", arguments=EDIT)
        assert (await scene.finished())["status"] == "completed"
        [message] = slack.messages.values()
        await eventually(lambda: message.updates, "chat.update")
        shown = block_texts(message.blocks or [])
        assert EDITED_LINE in shown and NEW_TOKEN not in shown
        assert scene.bank.transfers == [{"amount": 40000.0, "vendor": "ACME GMBH"}]
    assert slack.violations == []


async def test_wecom_marks_the_card_decided_and_follows_with_the_edits(
        database_url: str, wecom: FakeWeCom, secrets_key: str) -> None:
    specs = [ChannelSpec("ops-wecom", "wecom", "acme", wecom.channel_config())]
    async with waiting_run(database_url, specs, "ops-wecom", lambda: wecom.cards) as scene:
        [card] = wecom.cards.values()
        inbox = [r for r in card.card["horizontal_content_list"] if r.get("type") == 1]
        assert inbox[0]["value"] == "Open to edit"
        await scene.decide_in_inbox("approve", arguments=EDIT, message=MESSAGE)
        assert (await scene.finished())["status"] == "completed"
        await eventually(lambda: card.updates and wecom.texts, "the update and its notice")
        assert card.updates[0]["button"] == {"replace_name": "Approved by alice (inbox)"}
        [notice] = wecom.texts
        assert notice.startswith("Approved by alice via the web inbox")
        assert scene.request_id in notice
        assert EDITED_LINE in notice and f"Message to the agent: {MESSAGE}" in notice
        assert NEW_TOKEN not in notice
        assert scene.bank.transfers == [{"amount": 40000.0, "vendor": "ACME GMBH"}]
    assert wecom.violations == []
