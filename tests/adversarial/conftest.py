"""The adversarial suite's tally: each test records its attempts to get a call through that
must not run, and the session ends with one line saying how many got through."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from hookgate.approvals.persistent import PersistentApprovals
from hookgate.approvals.records import ConfirmationRequest
from tests.engines.world import ALICE, approvals

__all__ = ["approvals"]


@dataclass
class Tally:
    tried: list[str] = field(default_factory=list)
    through: list[str] = field(default_factory=list)

    def record(self, attempt: str, got_through: bool) -> None:
        self.tried.append(attempt)
        if got_through:
            self.through.append(attempt)


TALLY = Tally()


@pytest.fixture
def attempt() -> Tally:
    return TALLY


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Under pytest-xdist each worker keeps its own tally and hands it to the controller.
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["adversarial"] = {"tried": TALLY.tried, "through": TALLY.through}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    data = getattr(node, "workeroutput", {}).get("adversarial")
    if data:
        TALLY.tried.extend(data["tried"])
        TALLY.through.extend(data["through"])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TALLY.tried:
        terminalreporter.write_line(
            f"adversarial: {len(TALLY.tried)} attempts tried, {len(TALLY.through)} got through"
            + (f" ({', '.join(TALLY.through)})" if TALLY.through else ""))


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
