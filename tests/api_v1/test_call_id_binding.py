"""The guarded-call API binds an approval to its call id, against a real server on SQLite and
PostgreSQL through the real client: a second call id with the same tool and arguments never
takes the first call's approval, two identical calls of one model turn each get their own
request and both run once approved (neither is refused as "already used"), and an approval
of one session or user is nobody else's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hookgate.client import Allowed, Client, GuardRefused, Pending
from tests.api_v1.test_guarded_calls import ALICE, BOT, decide, deployment
from tests.conftest import migrated_database_url
from tests.live_server import LiveServer, live_server

ARGS = {"amount": 500, "to": "bob"}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[LiveServer]:
    url = migrated_database_url(request, tmp_path_factory.mktemp("v1b"))
    with live_server(deployment(url)) as srv:
        yield srv


@pytest.fixture
def guard(server: LiveServer) -> Iterator[Client]:
    client = Client(server.url, BOT, framework="langgraph")
    yield client
    client.close()


def ask(guard: Client, session: str, call_id: str, **kw: Any) -> Any:
    return guard.before_call(agent="payer", session_id=session, call_id=call_id,
                             tool=kw.pop("tool", "transfer"), arguments=kw.pop("args", ARGS))


def test_a_second_call_id_never_takes_the_first_calls_approval(
        server: LiveServer, guard: Client, attempt: Any) -> None:
    first = ask(guard, "s-second", "c1")
    assert isinstance(first, Pending)
    # While the first waits, and once it is approved but not yet used.
    waiting = ask(guard, "s-second", "c2")
    assert isinstance(waiting, Pending) and waiting.request_id != first.request_id
    decide(server, first.request_id, "approve")
    third = ask(guard, "s-second", "c3")
    attempt.record("v1 API: another call id took an approved, unused approval",
                   not isinstance(third, Pending))
    assert isinstance(third, Pending)
    assert third.request_id not in (first.request_id, waiting.request_id)
    # The approved call itself runs, once.
    allowed = guard.wait(first.call, timeout=10)
    assert isinstance(allowed, Allowed) and allowed.arguments == ARGS


def test_two_identical_calls_of_one_turn_each_ask_and_both_run(
        server: LiveServer, guard: Client, attempt: Any) -> None:
    one, two = ask(guard, "s-turn", "tc_1"), ask(guard, "s-turn", "tc_2")
    assert isinstance(one, Pending) and isinstance(two, Pending)
    assert one.request_id != two.request_id
    decide(server, one.request_id, "approve")
    decide(server, two.request_id, "approve")
    verdicts = [guard.wait(one.call, timeout=10), guard.wait(two.call, timeout=10)]
    attempt.record("v1 API: one of two identical approved calls refused",
                   not all(isinstance(v, Allowed) for v in verdicts))
    assert all(isinstance(v, Allowed) for v in verdicts), verdicts


def test_an_approval_is_not_another_sessions_or_users(
        server: LiveServer, guard: Client, attempt: Any) -> None:
    first = ask(guard, "s-own", "o1")
    assert isinstance(first, Pending)
    decide(server, first.request_id, "approve")
    other_session = ask(guard, "s-other", "o1")
    with Client(server.url, ALICE, framework="langgraph") as alice:
        other_user = ask(alice, "s-own", "o1")
    attempt.record("v1 API: an approval used by another session or user",
                   not (isinstance(other_session, Pending) and isinstance(other_user, Pending)))
    assert isinstance(other_session, Pending) and isinstance(other_user, Pending)
    assert first.request_id not in (other_session.request_id, other_user.request_id)


@pytest.mark.parametrize("tool", ["transfer ", "Transfer", "trаnsfer", "transfer\u200b"])
def test_a_look_alike_tool_under_an_approved_call_id_is_refused(
        server: LiveServer, guard: Client, tool: str, attempt: Any) -> None:
    session = f"s-look-{tool.encode('unicode_escape').decode()}"
    first = ask(guard, session, "l1")
    assert isinstance(first, Pending)
    decide(server, first.request_id, "approve")
    # Refused as a re-used call id, or (an invisible character) as no printable tool name.
    with pytest.raises(GuardRefused, match=r"already used|printable"):
        ask(guard, session, "l1", tool=tool)
    attempt.record(f"v1 API: look-alike tool {tool!a} under an approved call id", False)
    assert isinstance(guard.wait(first.call, timeout=10), Allowed)
