"""Input JSON cannot carry exactly (NaN, infinities, lone surrogates, nesting too deep, objects
that are not JSON) is refused by the HTTP clients with GuardRefused and the reason, before
anything is sent: the clients point at a port nobody listens on, so a request that went out
would be GuardUnavailable instead."""

from __future__ import annotations

from typing import Any

import pytest

from hookgate.client import AsyncClient, Client, GuardRefused
from tests.adversarial.conftest import Tally, attempt
from tests.live_server import free_port

__all__ = ["attempt"]


def deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"d": value}
    return value


#: name -> (arguments, what the refusal says)
BAD_ARGUMENTS: dict[str, tuple[dict[str, Any], str]] = {
    "NaN": ({"amount": float("nan")}, "NaN"),
    "Infinity": ({"amount": float("inf")}, "infinit"),
    "-Infinity": ({"amount": float("-inf")}, "-?infinit"),
    "lone surrogate": ({"to": "bob\ud83d"}, "lone surrogate"),
    "100-deep": ({"to": deep(100)}, "nest deeper"),
    "100000-deep": ({"to": deep(100_000)}, "nest deeper"),
    "not JSON": ({"when": object()}, "arguments.when is a object"),
    "a number as a key": ({1: "one"}, "key 1 .*not a string"),  # type: ignore[dict-item]
    "a bool as a key": ({True: "yes"}, "key True .*not a string"),  # type: ignore[dict-item]
    "a nested number key": ({"to": {"bob": {2: "x"}}}, r"arguments.to.bob .*key 2"),
    "a set": ({"tags": {"a", "b"}}, "arguments.tags is a set"),
    "bytes": ({"blob": b"\x00"}, "arguments.blob is a bytes"),
    "NaN in a list": ({"amounts": [1, float("nan")]}, r"arguments.amounts\[1\] is NaN"),
    "a lone surrogate in a key": ({"to\udc00": "bob"}, "lone surrogate"),
}


@pytest.fixture(scope="module")
def nowhere() -> str:
    return f"http://127.0.0.1:{free_port()}"


@pytest.mark.parametrize("name", list(BAD_ARGUMENTS))
async def test_bad_arguments_are_refused_with_the_reason_before_anything_is_sent(
        nowhere: str, name: str, attempt: Tally) -> None:
    arguments, said = BAD_ARGUMENTS[name]
    ask = {"agent": "payer", "session_id": "s", "call_id": "c", "tool": "transfer",
           "arguments": arguments}
    with Client(nowhere, "tok", framework="langgraph", timeout=2) as guard, \
            pytest.raises(GuardRefused, match=said):
        guard.before_call(**ask)
    async with AsyncClient(nowhere, "tok", framework="langgraph", timeout=2) as aguard:
        with pytest.raises(GuardRefused, match=said) as refused:
            await aguard.before_call(**ask)
    attempt.record(f"client: {name} arguments", refused.value is None)


async def test_bad_waits_results_and_call_ids_are_refused_before_anything_is_sent(
        nowhere: str, attempt: Tally) -> None:
    with Client(nowhere, "tok", framework="crewai", timeout=2) as guard:
        with pytest.raises(GuardRefused, match="NaN"):
            guard.report("gc_1", output={"total": float("nan")})
        with pytest.raises(GuardRefused, match="seconds >= 0"):
            guard.wait("gc_1", timeout=float("nan"))
        with pytest.raises(GuardRefused, match="lone surrogate") as refused:
            guard.decision("gc_\udc00", timeout=1)
    attempt.record("client: a call id with a lone surrogate", refused.value is None)
    async with AsyncClient(nowhere, "tok", framework="adk", timeout=2) as aguard:
        with pytest.raises(GuardRefused, match="seconds >= 0"):
            await aguard.decision("gc_1", timeout=float("inf"))
        with pytest.raises(GuardRefused, match="lone surrogate"):
            await aguard.start_session(agent="payer", session_id="s\ud800")


@pytest.mark.parametrize("arguments", [[("amount", 5)], "amount=5", None, 5])
async def test_arguments_that_are_not_a_json_object_are_refused_before_anything_is_sent(
        nowhere: str, arguments: Any, attempt: Tally) -> None:
    ask = {"agent": "payer", "session_id": "s", "call_id": "c", "tool": "transfer",
           "arguments": arguments}
    with Client(nowhere, "tok", framework="langgraph", timeout=2) as guard, \
            pytest.raises(GuardRefused, match="not a JSON object") as refused:
        guard.before_call(**ask)
    async with AsyncClient(nowhere, "tok", framework="adk", timeout=2) as aguard:
        with pytest.raises(GuardRefused, match="not a JSON object"):
            await aguard.before_call(**ask)
    attempt.record(f"client: arguments {type(arguments).__name__}", refused.value is None)
