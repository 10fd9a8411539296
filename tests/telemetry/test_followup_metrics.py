"""The follow-up counters: a request nobody can be reached for counts in
``hookgate.approval.unreachable`` with its cause, and each reminder sent in
``hookgate.approval.followups``."""

from __future__ import annotations

import pytest

from hookgate.approvals.escalation import Escalations
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.escalation_policy import EscalationPolicy
from hookgate.storage.database import Database
from hookgate.storage.orgs import sync_orgs
from hookgate.storage.users import DeclaredUser, sync_declared_users
from tests.approvals.test_escalation import OneChannel, overdue_request
from tests.fakes.slack import FakeSlack
from tests.telemetry.conftest import Otel


@pytest.fixture
def slack() -> FakeSlack:
    with FakeSlack() as fake:
        yield fake  # type: ignore[misc]


async def test_a_reminder_and_a_request_nobody_can_decide_are_counted(
        otel: Otel, db: Database, slack: FakeSlack) -> None:
    await sync_orgs(db, [("acme", "ACME", False)])
    await sync_declared_users(db, [DeclaredUser("olivia", "acme")])
    channels = OneChannel(slack)
    escalations = Escalations(PersistentApprovals(db, channels=channels))
    # Started by alice, whom the database does not know (scope initiator): nobody may
    # decide it.
    request = await overdue_request(db, EscalationPolicy(remind_after_s=1.0), waited_s=5)
    await escalations.check_reachable(request)
    after = await escalations.approvals.store.get(request.id)
    assert after is not None and after.unreachable is not None
    assert after.unreachable.startswith("no approver: alice (approver scope initiator)")

    await escalations.run_due(request.id)

    [flagged] = otel.points("hookgate.approval.unreachable")
    assert flagged.value == 1
    assert dict(flagged.attributes) == {"hookgate.approval.unreachable.cause": "no_approver",
                                        "hookgate.approval.mode": "channel"}
    [sent] = otel.points("hookgate.approval.followups")
    assert (sent.value, dict(sent.attributes)) == (
        1, {"hookgate.approval.followup.kind": "reminder"})
    await channels.channel.aclose()
