"""The health checks a proxy or an orchestrator polls: ``/healthz`` answers while the process
does; ``/readyz`` says whether it can serve now — 503 with the reason while its database's
schema is not this hookgate's, 200 again once it is — and neither needs a token or names the
database."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import text

from hookgate.storage.database import Database
from tests.channels.world import world
from tests.live_server import live_server


async def _set_revision(url: str, revision: str) -> str:
    """Stamp the schema's revision as ``revision``; the one it had."""
    db = Database(url)
    try:
        async with db.engine.begin() as conn:
            had = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
            await conn.execute(text("UPDATE alembic_version SET version_num = :r"),
                               {"r": revision})
    finally:
        await db.dispose()
    return str(had)


@pytest.mark.both_databases
async def test_readyz_follows_the_schema_and_healthz_the_process(database_url: str) -> None:
    deployment, _bank = world(database_url, [])
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            live = await client.get("/healthz")
            ready = await client.get("/readyz")
            assert (live.status_code, live.json()) == (200, {"status": "ok"})
            assert ready.status_code == 200 and ready.json()["status"] == "ok", ready.text

            head = await _set_revision(database_url, "0001")
            behind = await client.get("/readyz")
            assert behind.status_code == 503, behind.text
            reason = behind.json()["reason"]
            assert "hookgate db upgrade" in reason and "0001" in reason
            assert "postgres" not in reason and "sqlite" not in reason  # no URL
            assert (await client.get("/healthz")).status_code == 200

            await _set_revision(database_url, head)
            again = await client.get("/readyz")
            assert again.status_code == 200 and again.json()["status"] == "ok", again.text
