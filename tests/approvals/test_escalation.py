"""Follow-ups over a real database: of several instances following up on one request,
exactly one sends each reminder (the database's compare-and-set picks it), a late look
sends one reminder for all that were due, and the configuration refuses follow-ups that
could not work."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from hookgate.approvals.escalation import Escalations, next_due
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.approvals.records import ConfirmationRequest
from hookgate.channels.registry import create_channel
from hookgate.config import ConfigError, load_config
from hookgate.escalation_policy import EscalationPolicy, PolicyError, parse_duration
from hookgate.storage.database import Database
from tests.fakes.slack import FakeSlack

pytestmark = pytest.mark.both_databases


class OneChannel:
    """The channel directory of a server with one Slack channel."""

    def __init__(self, slack: FakeSlack) -> None:
        self.channel = create_channel("ops-slack", "slack", "acme", slack.channel_config())

    def get(self, channel_id: str):  # type: ignore[no-untyped-def]
        return self.channel if channel_id == self.channel.id else None

    def first_active(self, org_id: str | None):  # type: ignore[no-untyped-def]
        return self.channel


@pytest.fixture
def slack() -> FakeSlack:
    with FakeSlack() as fake:
        yield fake  # type: ignore[misc]


async def overdue_request(db: Database, policy: EscalationPolicy, waited_s: float
                          ) -> ConfirmationRequest:
    """A pending request made ``waited_s`` ago whose card went to ops-slack."""
    approvals = PersistentApprovals(db)
    now = await db.now()
    request, _ = await approvals.store.create(
        run_id="run-1", tool_call_id="call-1", agent_id="buyer", requested_by="alice",
        org_id="acme", mode="channel", channel_id="ops-slack", approver_scope="initiator",
        agent_owner_id="olivia", tool_name="wire_transfer", args={"amount": 60000},
        args_sha256="0" * 64, created_at=now - timedelta(seconds=waited_s),
        expires_at=now + timedelta(hours=1), followup=policy.to_json())
    await approvals.store.set_delivery(request.id, {"channel_id": "ops-slack", "ts": "1.1"})
    return request


@pytest.fixture
async def instances(database_url: str, db: Database) -> AsyncIterator[list[Database]]:
    """Five more connection pools on the same database: five instances."""
    pools = [Database(database_url) for _ in range(5)]
    yield pools
    for pool in pools:
        await pool.dispose()


async def test_five_instances_following_up_at_once_send_each_reminder_once(
        db: Database, instances: list[Database], slack: FakeSlack) -> None:
    policy = EscalationPolicy(remind_after_s=1.0, max_reminders=3)
    request = await overdue_request(db, policy, waited_s=10)
    channels = OneChannel(slack)
    escalations = [Escalations(PersistentApprovals(pool, channels=channels))
                 for pool in instances]

    await asyncio.gather(*(f.run_due(request.id) for f in escalations for _ in range(4)))

    texts = [m.text for m in slack.messages.values()]
    assert len(texts) == 1 and texts[0].startswith(f"Reminder: approval request {request.id}")
    after = await PersistentApprovals(db).store.get(request.id)
    assert after is not None
    # The three reminders were all due: one message counts for them, none is left.
    assert after.reminders_sent == 3 and next_due(after) is None
    await channels.channel.aclose()
    assert slack.violations == []


async def test_a_reminder_not_due_yet_is_not_sent_and_the_next_time_is_given(
        db: Database, slack: FakeSlack) -> None:
    policy = EscalationPolicy(remind_after_s=60.0, max_reminders=2)
    request = await overdue_request(db, policy, waited_s=1)
    channels = OneChannel(slack)
    again = await Escalations(PersistentApprovals(db, channels=channels)).run_due(request.id)
    assert slack.messages == {}
    assert again == request.created_at + timedelta(seconds=60)
    await channels.channel.aclose()


def test_durations_read_as_people_write_them() -> None:
    assert [parse_duration(v, "k") for v in ("90s", "15m", "2h", "1d", "500ms", 30, "1.5m")
            ] == [90.0, 900.0, 7200.0, 86400.0, 0.5, 30.0, 90.0]
    for bad in ("0s", "-5m", "soon", True, float("nan"), "15 minutes"):
        with pytest.raises(PolicyError):
            parse_duration(bad, "remind_after")


def test_a_policy_that_cannot_work_is_refused() -> None:
    with pytest.raises(PolicyError, match="not offered: a call nobody approved must not run"):
        EscalationPolicy(on_timeout="approve")  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="go together"):
        EscalationPolicy(escalate_after_s=60)
    with pytest.raises(PolicyError, match="must be shorter than confirmation_timeout_s"):
        EscalationPolicy(remind_after_s=3600).check_against(3600)


CONFIG = """
orgs: [{id: acme}, {id: other}]
users:
  - {id: alice, org: acme, token: t-alice}
  - {id: bob, org: acme}
  - {id: mallory, org: other}
channels:
  - {id: ops-slack, type: slack, org: acme,
     config: {bot_token: xoxb-1, channel: C1, signing_secret: s}}
models:
  m: {type: scripted, turns: [{answer: ok}]}
agents:
  - id: buyer
    org: acme
    model: m
    confirmation_timeout_s: 3600
"""


def load(tmp_path: Path, agent_lines: str) -> object:
    path = tmp_path / "hookgate.yaml"
    path.write_text(textwrap.dedent(CONFIG) + textwrap.indent(textwrap.dedent(agent_lines),
                                                               "    "), encoding="utf-8")
    return load_config(path, env={})


def test_the_configuration_keys_become_the_agents_policy(tmp_path: Path) -> None:
    config = load(tmp_path, """\
        remind_after: 15m
        max_reminders: 2
        escalate_after: 30m
        escalate_to: [bob, admins]
        escalation_channel_id: ops-slack
        on_timeout: expire
        """)
    agent = config.build_agent("buyer")  # type: ignore[attr-defined]
    assert agent.followup == EscalationPolicy(
        remind_after_s=900.0, max_reminders=2, escalate_after_s=1800.0,
        escalate_to=("bob", "admins"), escalation_channel_id="ops-slack",
        on_timeout="expire")
    default = load(tmp_path, "").build_agent("buyer")  # type: ignore[attr-defined]
    assert default.followup == EscalationPolicy()
    assert default.followup.on_timeout == "reject"


@pytest.mark.parametrize(("lines", "message"), [
    ("on_timeout: approve\n", "on_timeout: approve is not offered"),
    ("remind_after: 2h\n", "remind_after (7200 s) must be shorter"),
    ("escalate_after: 5m\nescalate_to: [carol]\n", "escalate_to[0]: unknown user 'carol'"),
    ("escalate_after: 5m\nescalate_to: [mallory]\n", "belongs to org 'other'"),
    ("escalate_after: 5m\nescalate_to: [bob]\nescalation_channel_id: nope\n",
     "escalation_channel_id: unknown channel 'nope'"),
    ("remind_after: later\n", "remind_after must be a duration"),
])
def test_follow_ups_that_could_not_work_are_refused_at_load(
        tmp_path: Path, lines: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, lines)
    assert message in str(info.value)


def test_a_damaged_stored_policy_follows_up_on_nothing_and_rejects_at_the_timeout() -> None:
    for damaged in ({"on_timeout": "approve"}, {"remind_after_s": "soon"},
                    {"max_reminders": "many"}, {"escalate_to": 5}, {"remind_after_s": -1}):
        assert EscalationPolicy.from_json(damaged) == EscalationPolicy(), damaged
    assert EscalationPolicy.from_json(None).on_timeout == "expire"  # made before follow-ups
