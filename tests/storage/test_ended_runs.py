"""A run whose end this process committed is read back from memory for a while, and the
answer is the database's own: its org, status, stored state and events after any seq. An end
that was not committed by this store (refused by its fence, or written without its `done`)
is read from the database, as is one kept longer than its time."""

from __future__ import annotations

from typing import Any

import pytest

from hookgate.engines.events import event_of
from hookgate.engines.interrupts import Fenced
from hookgate.engines.state import RunState
from hookgate.storage import ended_runs
from hookgate.storage.database import Database
from hookgate.storage.fencing import take_over
from hookgate.storage.runs import DatabaseRunStore, RunSummary

pytestmark = pytest.mark.both_databases


def emitted(state: RunState, type_: str, data: dict[str, Any]) -> Any:
    event = event_of(type_, data, len(state.trace) + 1)
    state.trace.append(event.to_dict())
    return event


async def ended_run(store: DatabaseRunStore, run_id: str) -> RunState:
    """A run saved as it starts, then ended with its events (tool call, result, answer,
    done) in its last checkpoint, as a run ends on the server."""
    state = RunState(run_id=run_id, agent_id="clerk", org_id="acme", user_id="alice")
    await store.save(state, fence=None)
    events = [emitted(state, "tool_call", {"name": "oa__note", "args": {"text": "é 😀"}}),
              emitted(state, "tool_result", {"name": "oa__note", "result": "noted"}),
              emitted(state, "answer", {"answer": "done"})]
    state.status = "completed"
    state.answer = "done"
    events.append(emitted(state, "done", {"status": "completed", "answer": "done"}))
    await store.save(state, events=events)
    return state


def as_read(summary: RunSummary | None) -> tuple[Any, ...]:
    assert summary is not None
    logged = None if summary.logged is None else [e.to_dict() for e in summary.logged]
    return summary.org_id, summary.status, summary.state_json, logged


def counted_reads(store: DatabaseRunStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The runs whose summary the store reads from the database from now on."""
    reads: list[str] = []
    summary_of = store.db.backend.run_summary

    async def counted(run_id: str, **kw: Any) -> Any:
        reads.append(run_id)
        return await summary_of(run_id, **kw)
    monkeypatch.setattr(store.db.backend, "run_summary", counted)
    return reads


def no_reads(store: DatabaseRunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    async def refused(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the database was read")
    monkeypatch.setattr(store.db.backend, "run_summary", refused)


async def test_an_end_committed_here_is_read_from_memory_as_the_database_has_it(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    store = DatabaseRunStore(db, trace_in_log=True)
    await ended_run(store, "run_e1")
    fresh = DatabaseRunStore(db, trace_in_log=True)  # nothing in memory: it reads
    expected = {after: as_read(await fresh.summary("run_e1", with_log=True, after=after))
                for after in range(6)}
    plain = as_read(await fresh.summary("run_e1"))
    assert expected[0][1] == "completed" and len(expected[0][3]) == 4

    no_reads(store, monkeypatch)
    for after in range(6):
        assert as_read(await store.summary("run_e1", with_log=True, after=after)) \
            == expected[after]
    assert as_read(await store.summary("run_e1")) == plain


async def test_an_end_refused_by_the_fence_is_not_kept(db: Database) -> None:
    store = DatabaseRunStore(db, trace_in_log=True)
    state = RunState(run_id="run_e2", agent_id="clerk", org_id="acme")
    await store.save(state)
    fence = await take_over(db, "run_e2")
    assert fence is not None
    assert await take_over(db, "run_e2") is not None  # another executor took it since
    state.status = "completed"
    done = emitted(state, "done", {"status": "completed", "answer": None})
    with pytest.raises(Fenced):
        await store.save(state, fence=fence, events=[done])
    summary = await store.summary("run_e2", with_log=True)
    assert summary is not None and summary.status == "running" and summary.logged == []


async def test_an_end_without_its_done_in_the_trace_is_read_from_the_database(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    store = DatabaseRunStore(db, trace_in_log=True)
    state = RunState(run_id="run_e3", agent_id="clerk", org_id="acme")
    await store.save(state)
    state.status = "failed"
    # The end goes to the log only (as record_failure writes it): the trace lacks it.
    done = event_of("done", {"status": "failed", "answer": None}, 1)
    await store.save(state, events=[done])
    reads = counted_reads(store, monkeypatch)
    summary = await store.summary("run_e3", with_log=True)
    assert reads == ["run_e3"]
    assert summary is not None and [e.type for e in summary.logged or []] == ["done"]


async def test_an_end_kept_past_its_time_is_read_again(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ended_runs, "KEPT_S", -1.0)  # already past its time when kept
    store = DatabaseRunStore(db, trace_in_log=True)
    await ended_run(store, "run_e4")
    reads = counted_reads(store, monkeypatch)
    summary = await store.summary("run_e4", with_log=True)
    assert reads == ["run_e4"] and summary is not None and summary.status == "completed"


def test_only_the_last_runs_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ended_runs, "KEPT", 3)
    kept = ended_runs.EndedRuns()
    done = [{"type": "done", "seq": 1, "status": "completed", "answer": None}]
    for i in range(5):
        kept.ended(f"run_{i}", "acme", "completed", "{}", done)
    assert [kept.get(f"run_{i}") is not None for i in range(5)] == [False, False, True,
                                                                    True, True]
