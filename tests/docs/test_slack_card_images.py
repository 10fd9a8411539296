"""The pictures of the Slack messages on docs/channels/slack.md show what hookgate sends: the
committed Block Kit JSON beside each picture is what scripts/slack_card_images.py renders
now, and that is what the Slack channel posts (``chat.postMessage``, then ``chat.update``)
to the fake Slack API for the same request and decision. Regenerate with
``python scripts/slack_card_images.py``."""

from __future__ import annotations

import json
from typing import Any

import slack_card_images  # scripts/ is on sys.path (tests/conftest.py)

from hookgate.channels.base import DeliveredCard
from hookgate.channels.slack.channel import SlackChannel
from tests.docs.samples import DOCS
from tests.fakes.slack import FakeSlack

IMAGES = DOCS / "channels" / "img"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def without_time_left(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocks with the "Time left" line blanked (it depends on the clock of the send)."""
    text = json.dumps(blocks)
    start = text.index("Time left: ")
    end = text.index("\\n", start) if "\\n" in text[start:] else text.index('"', start)
    return list(json.loads(text[:start] + "Time left: -" + text[end:]))


def test_the_committed_block_kit_json_is_what_the_script_renders_now() -> None:
    rendered = slack_card_images.messages()
    committed = {path.stem: json.loads(path.read_text(encoding="utf-8"))
                 for path in IMAGES.glob("slack-*.json")}
    assert committed == rendered, (
        "the Slack message changed: run `python scripts/slack_card_images.py` and commit "
        "docs/channels/img")


def test_the_page_shows_each_picture() -> None:
    page = (DOCS / "channels" / "slack.md").read_text(encoding="utf-8")
    for name in slack_card_images.messages():
        assert f"](img/{name}.png)" in page, name
        assert (IMAGES / f"{name}.png").read_bytes().startswith(PNG_MAGIC), name


async def test_the_slack_channel_sends_the_blocks_the_pictures_show() -> None:
    rendered = slack_card_images.messages()
    with FakeSlack() as fake:
        channel = SlackChannel("ops-slack", "acme", fake.channel_config())
        try:
            delivered = await channel.send_card(slack_card_images.card_images.SAMPLE)
            [message] = fake.messages.values()
            assert message.blocks is not None
            assert without_time_left(message.blocks) == without_time_left(
                rendered["slack-approval"])

            await channel.update_card(DeliveredCard(delivered.channel_id, delivered.ref),
                                      slack_card_images.APPROVED)
            assert message.blocks == rendered["slack-approved"]
        finally:
            await channel.aclose()
    assert fake.violations == []
