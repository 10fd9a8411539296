"""Keys of the external path are typed: ids a caller sends hold no control character, and
every key is a hash over the canonical JSON of its typed tuple, so tuples that would join
into one string stay apart (the guarded-call API and the Claude Code endpoint both)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hookgate.external.calls import call_key
from hookgate.external.keys import BadId, Entry, EntryKind, checked_id, session_run_id
from tests.external.world import deployment, h
from tests.live_server import LiveServer, live_server


def test_tuples_that_join_alike_have_different_keys() -> None:
    pairs = [(("a", "b", "c\x00d", "e"), ("a", "b", "c", "d\x00e")),
             (("ab", "", "c", "d"), ("a", "b", "c", "d")),
             (("a", "b", "c:d", "e"), ("a", "b", "c", "d:e"))]
    for one, two in pairs:
        assert call_key(*one) != call_key(*two)
        assert session_run_id("ext-", *one[:3]) != session_run_id("ext-", *two[:3])
    kinds = {Entry(kind, ("c1",)).key for kind in EntryKind}
    assert len(kinds) == len(EntryKind)
    assert Entry(EntryKind.REPORT, ("c1", "")).key != Entry(EntryKind.REPORT, ("c1",)).key


@pytest.mark.parametrize("value", ["a\x00b", "\n", "x\u200by", "\ud800", "a\u2029"])
def test_ids_with_control_characters_are_refused(value: str) -> None:
    with pytest.raises(BadId, match="call_id"):
        checked_id("call_id", value, 100)


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('keys') / 'hookgate.db'}"
    with live_server(deployment(url)) as server:
        yield server


_n = itertools.count()


@pytest.mark.parametrize("field,value", [("session_id", "s\x00t"), ("tool_use_id", "t\x00u"),
                                         ("tool_use_id", "t\x1b[0m")])
@pytest.mark.parametrize("event", ["PreToolUse", "PostToolUse"])
def test_claude_code_ids_with_control_characters_are_refused(
        srv: LiveServer, attempt: Any, field: str, value: str, event: str) -> None:
    body = {"hook_event_name": event, "session_id": f"s{next(_n)}", "cwd": "/w",
            "tool_name": "Read", "tool_input": {"file_path": "/w/a"}, "tool_use_id": "toolu_1",
            "tool_response": "ok", field: value}
    r = httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "payer"}, headers=h(),
                   json=body, timeout=30)
    if event == "PreToolUse":
        assert r.status_code == 200, r.text
        out = r.json()["hookSpecificOutput"]
        attempt.record(f"Claude Code: a control character in {field}",
                       out.get("permissionDecision") != "deny")
        assert out["permissionDecision"] == "deny" and field in out["permissionDecisionReason"]
    else:
        assert r.status_code == 400 and field in r.text, r.text
