"""Quorum and four eyes on chat cards: the card says why two people are needed, the
requester's click is refused, one approval is recorded with "1 of 2 approvals" while the
card keeps its buttons, and the second distinct approver's click decides it (Feishu,
with the fake Open Platform on loopback; Slack and WeCom show the same reasons)."""

from __future__ import annotations

from datetime import UTC, datetime

from hookgate.approvals.quorum import QuorumRule
from hookgate.channels.masking import DEFAULT_SECRET_PATTERNS
from hookgate.channels.slack import blocks as slack
from hookgate.channels.wecom import cards as wecom
from hookgate.runtime.deployment import ChannelSpec
from tests.channels.conftest import approval_card
from tests.channels.world import eventually, waiting_run
from tests.fakes.feishu import FakeFeishu, buttons_of, card_text

QUORUM = {"allow_self_approval": False,
          "approval_quorum": (QuorumRule.parse("wire_transfer", "args.amount > 50000", 2,
                                               None),)}
NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
TWO = "2 distinct people must approve (the agent's quorum rule for 'wire_transfer' when " \
      "args.amount > 50000)"


async def test_a_feishu_card_needs_two_distinct_approvers_and_never_the_requester(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    channels = [ChannelSpec("ops-feishu", "feishu", "acme", feishu.channel_config())]
    async with waiting_run(database_url, channels, "ops-feishu", feishu.cards,
                           agent_options=QUORUM, scope="org_members") as scene:
        card = feishu.cards()[0]
        assert TWO in card_text(card)
        approve, _reject = (b["behaviors"][0]["value"] for b in buttons_of(card))

        mine = await scene.send(feishu.card_click(scene.request_id, "approve",
                                                  open_id="ou_alice", value=approve))
        assert mine.json()["toast"]["type"] == "warning"
        assert "four eyes" in mine.json()["toast"]["content"]
        first = await scene.send(feishu.card_click(scene.request_id, "approve",
                                                   open_id="ou_bob", value=approve))
        assert first.json()["toast"] == {
            "type": "warning",
            "content": "Approval recorded: 1 of 2 approvals (bob); waiting for more"}
        assert "card" not in first.json()  # the card keeps its buttons
        again = await scene.send(feishu.card_click(scene.request_id, "approve",
                                                   open_id="ou_bob", value=approve))
        assert "one person counts once" in again.json()["toast"]["content"]
        assert scene.bank.transfers == []
        record = await scene.record()
        assert (record["status"], record["approvals"]["count"]) == ("pending", 1)

        second = await scene.send(feishu.card_click(scene.request_id, "approve",
                                                    open_id="ou_olivia", value=approve))
        assert second.json()["toast"] == {"type": "success", "content": "Approved"}
        assert (await scene.finished())["status"] == "completed"
        assert len(scene.bank.transfers) == 1
        message = next(iter(feishu.messages.values()))
        await eventually(lambda: message.patches, "the card's PATCH")
        assert "Approved by olivia via Feishu" in card_text(message.content)
        record = await scene.record()
        assert [(a["user_id"], a["via"]) for a in record["approvals"]["approved_by"]] == [
            ("bob", "feishu"), ("olivia", "feishu")]
    assert feishu.violations == []


def test_slack_and_wecom_cards_show_why_two_approvers_are_needed() -> None:
    context = {"reasons": [{"kind": "quorum", "text": TWO}]}
    blocks = slack.approval_blocks(approval_card(context=context), now=NOW,
                                   patterns=DEFAULT_SECRET_PATTERNS)
    assert TWO in str(blocks)
    card = wecom.approval_card(approval_card(context=context), now=NOW,
                               patterns=DEFAULT_SECRET_PATTERNS)
    # WeCom's rows hold 26 characters: the quorum's words come first so they survive the cut.
    rows = {r["keyname"]: r["value"] for r in card["horizontal_content_list"]}
    assert rows["Why"].startswith("2 distinct people must")
