"""Migration 0030 gives standing rules their ``mode``: on SQLite and PostgreSQL a database
with rules made before it upgrades with every rule enforcing (as it was), a new rule may be
stored in shadow mode and switched, and the downgrade drops the column again."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from hookgate.storage.approval_rules import RuleTable
from hookgate.storage.database import Database
from tests.storage.migration_steps import columns, downgrade


@pytest.mark.both_databases
@pytest.mark.empty_database
async def test_rules_made_before_0030_stay_enforcing_and_a_new_one_can_be_shadow(
        database_url: str) -> None:
    db = Database(database_url)
    try:
        await db.upgrade("0029")
        assert "mode" not in await columns(db, "approval_rules")
        async with db.engine.begin() as conn:
            await conn.execute(text(
                "INSERT INTO approval_rules (id, org_id, agent_id, tool_name, scope, "
                "created_by, created_at, uses) VALUES ('ar_old', 'acme', 'buyer', 'pay', "
                "'org', 'alice', :at, 3)"), {"at": datetime.now(UTC).replace(tzinfo=None)})
        await db.upgrade()
        table = RuleTable(db)
        old = await table.get("ar_old")
        assert old is not None and (old.mode, old.uses) == ("enforce", 3), old
        assert old.to_dict()["mode"] == "enforce"
        assert await table.set_mode("ar_old", "shadow")
        switched = await table.get("ar_old")
        assert switched is not None and switched.mode == "shadow"
        [listed] = await table.unrevoked_for("acme", "buyer", "pay")
        assert listed.mode == "shadow"
        async with db.engine.begin() as conn:
            await conn.run_sync(downgrade, "0029")
        assert "mode" not in await columns(db, "approval_rules")
        async with db.engine.connect() as conn:
            kept = (await conn.execute(text(
                "SELECT uses FROM approval_rules WHERE id = 'ar_old'"))).scalar_one()
        assert kept == 3
    finally:
        await db.dispose()
