"""A lasting MCP session (stdio, the relay's socket) refuses every request from the first
moment any check of its caller finds the access gone: the session's periodic check or a
waiting call's own (which used to leave a window in which `tools/list` was still answered,
until the session's next periodic check)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from mcp import MCPError

from hookgate.mcp.gateway import Principal
from hookgate.mcp.session_end import SessionEnd


def principal(answers: list[bool | Exception]) -> Principal:
    said = iter(answers)

    async def still_allowed() -> bool:
        answer = next(said)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return Principal(cast(Any, None), cast(Any, None), "alice", "acme", "s-1", still_allowed)


async def test_a_loss_a_waiting_calls_check_finds_refuses_every_later_request() -> None:
    end = SessionEnd(principal([True, False, True]))
    assert end.checked() is end.who
    assert await end.who.still_allowed()
    assert end.checked() is end.who
    # The check a waiting call makes (gateway: the principal the request was given).
    assert not await end.checked().still_allowed()
    with pytest.raises(MCPError, match="access ended"):
        end.checked()
    # Latched: an answer of yes later does not reopen the session.
    assert await end.who.still_allowed()
    with pytest.raises(MCPError, match="access ended"):
        end.checked()


async def test_a_check_that_cannot_answer_ends_the_session() -> None:
    end = SessionEnd(principal([OSError("database unreachable")]))
    with pytest.raises(OSError):
        await end.who.still_allowed()
    with pytest.raises(MCPError, match="access ended"):
        end.checked()


async def test_the_sessions_own_loss_refuses_at_once() -> None:
    end = SessionEnd(principal([]))
    waits_cancelled = []

    async def cancel_waits() -> None:
        # Refused already while the waiting calls are being ended.
        with pytest.raises(MCPError):
            end.checked()
        waits_cancelled.append(True)

    await end.now(cancel_waits())
    assert waits_cancelled == [True]


def test_a_principal_whose_access_cannot_change_is_served_as_is() -> None:
    who = Principal(cast(Any, None), cast(Any, None), "lib", "acme")
    end = SessionEnd(who)
    assert end.who is who and end.checked() is who
