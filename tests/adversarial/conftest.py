"""The adversarial suite's tally: each test records its attempts to get a call through that
must not run, and the session ends with one line saying how many got through."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from hookgate.approvals.persistent import PersistentApprovals
from hookgate.approvals.records import ConfirmationRequest
from tests.adversarial_tally import TALLY, Tally
from tests.engines.world import ALICE, approvals

__all__ = ["approvals"]


@pytest.fixture
def attempt() -> Tally:
    return TALLY


@asynccontextmanager
async def rejecting(service: PersistentApprovals) -> AsyncIterator[list[ConfirmationRequest]]:
    """A person who rejects every request that reaches their inbox while the block runs."""
    rejected: list[ConfirmationRequest] = []

    async def person() -> None:
        while True:
            for request in await service.store.list_for_org(org_id="acme", status="pending"):
                rejected.append(await service.decide(request.id, "reject", ALICE,
                                                     reason="not approved"))
            await asyncio.sleep(0.02)

    task = asyncio.create_task(person())
    try:
        yield rejected
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
