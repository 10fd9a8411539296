"""The configuration sync at start is upserts: many instances syncing the same declarations
at the same moment (without the start-up lock) all succeed and leave exactly the declared
rows, and an org's operational read-only flag survives a re-sync."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select, text

from hookgate.runtime.channel_records import SECRETS_KEY_ENV, SecretsKey
from hookgate.runtime.runtime import Runtime
from hookgate.storage.orgs import set_org_read_only
from hookgate.storage.tables import AgentRow, ChannelRow, Org, User
from tests.channels.test_secrets_at_rest import feishu_spec
from tests.channels.world import world

SIMULTANEOUS = 8


@pytest.mark.both_databases
async def test_simultaneous_syncs_all_succeed_and_write_the_declarations_once(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRETS_KEY_ENV, str(SecretsKey.generate()))
    deployment, _ = world(database_url, [feishu_spec()])
    runtimes = [Runtime(deployment) for _ in range(SIMULTANEOUS)]
    try:
        await runtimes[0].db.upgrade()
        # Every runtime has its own engine (its own connections), as separate processes do;
        # all of them insert rows that do not exist yet, at once.
        results = await asyncio.gather(*(rt.sync() for rt in runtimes),
                                       return_exceptions=True)
        assert [r for r in results if isinstance(r, BaseException)] == []

        db = runtimes[0].db
        await set_org_read_only(db, "acme", True)  # operational state, set through the API
        await asyncio.gather(*(rt.sync() for rt in runtimes))
        async with db.session() as s:
            orgs = (await s.execute(select(Org.id, Org.name, Org.read_only)
                                    .order_by(Org.id))).all()
            users = (await s.execute(select(User.id).order_by(User.id))).scalars().all()
            agents = (await s.execute(select(AgentRow.id, AgentRow.definition))).all()
            channels = (await s.execute(select(ChannelRow.id, ChannelRow.enabled))).all()
            declared = (await s.execute(text(
                "SELECT count(*) FROM users WHERE declared AND NOT disabled"))).scalar_one()
        assert orgs == [("acme", "ACME Corp", True), ("other", "Other Inc", False)]
        assert list(users) == ["alice", "bob", "mallory", "olivia"] and declared == 4
        assert [a[0] for a in agents] == ["buyer"]
        assert agents[0][1]["tools"] == ["wire_transfer", "channel_notify"]
        assert [tuple(c) for c in channels] == [("ops-feishu", True)]
    finally:
        for rt in runtimes:
            await rt.db.dispose()
