"""The pictures of the Teams cards on docs/channels/teams.md show what hookgate sends: the
committed Adaptive Card JSON beside each picture is what scripts/card_images.py renders now,
and that is what the Teams channel posts to the Bot Connector (the fake one) for the same
request and decision. Regenerate with ``python scripts/card_images.py``."""

from __future__ import annotations

import copy
import json
from typing import Any

import card_images  # scripts/ is on sys.path (tests/conftest.py)

from hookgate.channels.base import DeliveredCard
from hookgate.channels.teams.channel import TeamsChannel
from tests.docs.samples import DOCS
from tests.fakes.teams import FakeTeams

IMAGES = DOCS / "channels" / "img"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def without_time_left(card: dict[str, Any]) -> dict[str, Any]:
    """The card with its "Time left" fact blanked (it depends on the clock of the send)."""
    card = copy.deepcopy(card)
    for block in card["body"]:
        for fact in block.get("facts", []):
            if fact["title"] == "Time left":
                fact["value"] = "-"
    return card


def test_the_committed_card_json_is_what_the_script_renders_now() -> None:
    rendered = card_images.cards()
    committed = {path.stem: json.loads(path.read_text(encoding="utf-8"))
                 for path in IMAGES.glob("teams-*.json")}
    assert committed == rendered, (
        "the Teams card changed: run `python scripts/card_images.py` and commit docs/"
        "channels/img")


def test_the_page_shows_each_picture() -> None:
    page = (DOCS / "channels" / "teams.md").read_text(encoding="utf-8")
    for name in card_images.cards():
        assert f"](img/{name}.png)" in page, name
        assert (IMAGES / f"{name}.png").read_bytes().startswith(PNG_MAGIC), name


async def test_the_teams_channel_sends_the_cards_the_pictures_show() -> None:
    rendered = card_images.cards()
    with FakeTeams() as fake:
        channel = TeamsChannel("ops-teams", "acme", fake.channel_config())
        try:
            delivered = await channel.send_card(card_images.SAMPLE)
            [activity] = fake.activities.values()
            assert activity.card is not None
            assert without_time_left(activity.card) == without_time_left(
                rendered["teams-approval"])

            await channel.update_card(DeliveredCard(delivered.channel_id, delivered.ref),
                                      card_images.APPROVED)
            assert activity.card == rendered["teams-approved"]
        finally:
            await channel.aclose()
    assert fake.violations == []
