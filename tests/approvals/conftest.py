"""The approval service over the test database, started and stopped around each test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from hookgate.approvals.persistent import PersistentApprovals
from hookgate.storage.database import Database


@pytest.fixture
async def approvals(db: Database) -> AsyncIterator[PersistentApprovals]:
    service = PersistentApprovals(db, sweep_interval=0.2)
    await service.start()
    yield service
    await service.stop()
