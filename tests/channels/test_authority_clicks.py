"""Chat clicks obey who may decide now (approvals/authority.py): a quorum vote given by a
click stops counting once its voter moved to another org — the next click reads "1 of 2",
the call does not run — and a moved person's own click decides nothing (Feishu, with the
fake Open Platform on loopback)."""

from __future__ import annotations

from sqlalchemy import update

from hookgate.approvals.quorum import QuorumRule
from hookgate.runtime.deployment import ChannelSpec
from hookgate.storage.tables import User
from tests.channels.world import waiting_run
from tests.fakes.feishu import FakeFeishu, buttons_of

QUORUM = {"approval_quorum": (QuorumRule.parse("wire_transfer", "args.amount > 50000", 2,
                                               False),)}


async def test_a_click_vote_of_a_voter_who_moved_org_no_longer_counts(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    channels = [ChannelSpec("ops-feishu", "feishu", "acme", feishu.channel_config())]
    async with waiting_run(database_url, channels, "ops-feishu", feishu.cards,
                           agent_options=QUORUM, scope="org_members") as scene:
        approve, _reject = (b["behaviors"][0]["value"]
                            for b in buttons_of(feishu.cards()[0]))
        first = await scene.send(feishu.card_click(scene.request_id, "approve",
                                                   open_id="ou_bob", value=approve))
        assert "1 of 2 approvals (bob)" in first.json()["toast"]["content"]

        async def move_bob() -> None:
            async with scene.srv.runtime.db.transaction() as s:
                await s.execute(update(User).where(User.id == "bob").values(org_id="other"))

        scene.srv.call(move_bob())
        second = await scene.send(feishu.card_click(scene.request_id, "approve",
                                                    open_id="ou_olivia", value=approve))
        assert second.json()["toast"] == {
            "type": "warning",
            "content": "Approval recorded: 1 of 2 approvals (olivia); waiting for more"}
        record = await scene.record()
        assert (record["status"], record["approvals"]["count"]) == ("pending", 1)
        [gone] = record["approvals"]["no_longer_counting"]
        assert gone["user_id"] == "bob" and "not a member" in gone["no_longer_counts"]
        # Bob's own click, now from another org, decides nothing.
        moved = await scene.send(feishu.card_click(scene.request_id, "reject",
                                                   open_id="ou_bob", value=_reject))
        assert "not allowed" in moved.json()["toast"]["content"]
        assert (await scene.record())["status"] == "pending"
        assert scene.bank.transfers == []
    assert feishu.violations == []
