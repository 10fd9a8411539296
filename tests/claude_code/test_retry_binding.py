"""Which Claude Code call an approval covers, over real HTTP and a real database: the one
exception (interactive mode's identical retry under a new tool_use_id joins the request of
a call that gave up waiting) and nothing past it: headless mode resumes with the same id,
so a new id there asks again; two identical calls of one turn that are both still waiting
get a request each, and each retry then runs once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.claude_code.scene import coder
from tests.claude_code.test_hook_endpoint import PUSH, approve, decision, hook, pending, pre
from tests.live_server import LiveServer, live_server

pytestmark = pytest.mark.both_databases


def _server(database_url: str, wait_s: float) -> Iterator[LiveServer]:
    deployment = coder(wait_s=wait_s)
    deployment.database_url = database_url
    agent = deployment.agents["coder"]
    agent.confirmation_mode = "inline_only"
    agent.approval_channel_id = None
    with live_server(deployment) as server:
        yield server


@pytest.fixture
def srv(database_url: str) -> Iterator[LiveServer]:
    yield from _server(database_url, 0.3)


@pytest.fixture
def slow(database_url: str) -> Iterator[LiveServer]:
    yield from _server(database_url, 4.0)


def test_headless_mode_binds_the_approval_to_its_tool_use_id(srv: LiveServer) -> None:
    answer, _why = decision(hook(srv, pre("Bash", PUSH, "toolu_h1"), headless=True))
    [request] = pending(srv)
    assert answer == "defer"
    approve(srv, request["id"])
    # Another tool_use_id with the same command: not the deferred call, so it asks.
    other, why = decision(hook(srv, pre("Bash", PUSH, "toolu_h2"), headless=True))
    assert other == "defer" and request["id"] not in why
    # `claude -p --resume` asks again with the deferred call's own id: it runs, once.
    resumed, why = decision(hook(srv, pre("Bash", PUSH, "toolu_h1"), headless=True))
    assert resumed == "allow" and request["id"] in why


def test_a_retry_joins_only_a_call_that_gave_up(srv: LiveServer) -> None:
    # The headless call gave up with `defer` (it resumes with its own id): an interactive
    # identical call is not its retry.
    decision(hook(srv, pre("Bash", PUSH, "toolu_d1"), headless=True))
    [deferred] = pending(srv)
    answer, why = decision(hook(srv, pre("Bash", PUSH, "toolu_i1")))
    assert answer == "deny" and deferred["id"] not in why
    assert len(pending(srv)) == 2


def test_two_identical_calls_still_waiting_get_a_request_each_and_each_retry_runs(
        slow: LiveServer) -> None:
    answers: dict[str, Any] = {}

    def call(call_id: str) -> None:
        answers[call_id] = decision(hook(slow, pre("Bash", PUSH, call_id)))

    both = [threading.Thread(target=call, args=(i,)) for i in ("toolu_p1", "toolu_p2")]
    for thread in both:
        thread.start()
    for thread in both:
        thread.join(30)
    requests = pending(slow)
    assert sorted(r["tool_call_id"] for r in requests) == ["toolu_p1", "toolu_p2"]
    assert [a[0] for a in answers.values()] == ["deny", "deny"]
    for request in requests:
        approve(slow, request["id"])
    # Each told to make the identical call again: each retry runs, once; none is refused.
    retries = [decision(hook(slow, pre("Bash", PUSH, i))) for i in ("toolu_r1", "toolu_r2")]
    assert [r[0] for r in retries] == ["allow", "allow"], retries
    assert {r["id"] for r in requests} == {
        next(r["id"] for r in requests if r["id"] in why) for _a, why in retries}
    third, _why = decision(hook(slow, pre("Bash", PUSH, "toolu_r3")))
    assert third == "deny"
