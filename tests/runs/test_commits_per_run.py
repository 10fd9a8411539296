"""What a one-call run commits on PostgreSQL, as the server counts its transactions: the run
accepted with its job; the user's request kept as a fact of the session; the call claimed
with the model's turn; the call's result kept as a fact; the result with the checkpoint
after it; the run's end with its job ended (docs/development/durable-path.md). On a SQLite
file the same, without a job.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from hookgate import Agent, ScriptedLLM, tool
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.records import ConfirmationRequest
from hookgate.runs.executors.in_process import InProcessExecutor
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec
from hookgate.storage import database
from hookgate.storage.backends import pg_driver, sqlite_driver
from hookgate.storage.run_writes import RUN_EVENTS_CHANNEL
from hookgate.storage.statement_count import StatementCount
from tests.live_server import LiveServer, live_server

#: Runs before the counted ones (a connection's first statements: asyncpg's type reads).
WARM_UP = 3
COUNTED = 12
#: The run's own commits, each named in the docs with the invariant it protects: four for
#: the run, and one for each of the session's two facts (its request, the call's result),
#: each a single statement (the request was a transaction of two before decision 0023).
MOST_PER_RUN = 6


def one_call_deployment(database_url: str) -> tuple[Deployment, list[str]]:
    ran: list[str] = []

    @tool(writes=True)
    async def oa__note(text: str) -> str:
        """Write a note."""
        ran.append(text)
        return "noted"

    agent = Agent(id="clerk", name="Clerk", instructions="You take notes.", tools=[oa__note],
                  org_id="acme", owner_user_id="alice")
    turns = [{"tool_calls": [{"name": "oa__note", "args": {"text": "x"}}]},
             {"answer": "done"}]
    return Deployment(
        database_url=database_url, orgs=[OrgSpec("acme", "ACME")],
        users=[UserSpec("alice", "acme", admin=True)], agents={"clerk": agent},
        model_for=lambda _a: ScriptedLLM(turns)), ran


async def runs_to_the_end(srv: LiveServer, n: int, agent: str = "clerk") -> list[str]:
    """``n`` runs of ``agent`` one after another, each awaited until its job is finished
    (the run ended, or parked); their ids."""
    runtime = srv.runtime
    ids: list[str] = []
    for _ in range(n):
        state = await runtime.runs.start(agent, "go", user_id="alice", org_id="acme")
        running = set(runtime.queue.taken._running)
        assert running, "the run was not taken by this instance"
        await asyncio.wait(running)
        ids.append(state.run_id)
    return ids


def server_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StatementCount:
    """The server's own count of its transactions (bench/throughput.py's), in this process:
    a statement outside a transaction is one, a transaction with its statements is one."""
    count = StatementCount(str(tmp_path / "count.json"))
    monkeypatch.setattr(count, "start", lambda: None)  # no file to write
    monkeypatch.setattr(database, "COUNT", count)
    monkeypatch.setattr(pg_driver, "COUNT", count)
    return count


@pytest.mark.perf  # a count of commits: a performance internal
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_one_call_run_commits_at_most_six_times(
        database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    count = server_count(tmp_path, monkeypatch)
    dep, ran = one_call_deployment(database_url)
    # No expiry sweeps (each one a read) in between: only the runs' own work.
    with live_server(dep, sweep_interval=3600) as srv:
        srv.call(runs_to_the_end(srv, WARM_UP), timeout=60)
        before = (count.transactions, count.statements)
        ids = srv.call(runs_to_the_end(srv, COUNTED), timeout=120)
        after = (count.transactions, count.statements)
    assert ran == ["x"] * (WARM_UP + COUNTED)  # each call's tool ran exactly once
    url = make_url(database_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False)) as conn:
        done = conn.execute("SELECT count(*) FROM runs WHERE id = ANY(%s) "
                            "AND status = 'completed'", (ids,)).fetchone()
    assert done == (COUNTED,)
    transactions, statements = ((a - b) / COUNTED for a, b in zip(after, before, strict=True))
    # The queue's heartbeats and polls (every few seconds, not per run) may fall in the
    # window: a few of them stay under the half (before the folds: 7 per run, and the
    # facts' 2 more; statements 7 per run while the request fact took a read and an insert).
    assert transactions <= MOST_PER_RUN + 0.5, f"{transactions:.2f} commits per run"
    assert statements <= MOST_PER_RUN + 0.5, f"{statements:.2f} statements per run"


async def runs_here_to_the_end(srv: LiveServer, n: int) -> list[str]:
    """``n`` runs of the clerk one after another on a SQLite file, each awaited until its
    task in this process ended; their ids."""
    runtime = srv.runtime
    executor = runtime.runs.executor
    assert isinstance(executor, InProcessExecutor)
    ids: list[str] = []
    for _ in range(n):
        state = await runtime.runs.start("clerk", "go", user_id="alice", org_id="acme")
        await asyncio.wait([executor.tasks[state.run_id]])
        ids.append(state.run_id)
    return ids


@pytest.mark.perf  # a count of commits: a performance internal
def test_a_one_call_run_on_a_sqlite_file_commits_as_often_as_on_postgresql(
        database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The turn rides with the call's claim and the result with the checkpoint after it, as
    # on PostgreSQL (before decision record 0041: 8 per run, each of them on its own).
    count = server_count(tmp_path, monkeypatch)
    monkeypatch.setattr(sqlite_driver, "COUNT", count)
    dep, ran = one_call_deployment(database_url)
    with live_server(dep, sweep_interval=3600) as srv:
        srv.call(runs_here_to_the_end(srv, WARM_UP), timeout=60)
        before = count.transactions
        ids = srv.call(runs_here_to_the_end(srv, COUNTED), timeout=120)
        transactions = (count.transactions - before) / COUNTED
        summaries = [srv.call(srv.runtime.runs.store.summary(i)) for i in ids]
    assert ran == ["x"] * (WARM_UP + COUNTED)  # each call's tool ran exactly once
    assert [s.status if s else None for s in summaries] == ["completed"] * COUNTED
    assert transactions <= MOST_PER_RUN, f"{transactions:.2f} commits per run"


@pytest.mark.perf  # NOTIFYs: each costs every listening backend a transaction
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_run_its_instance_took_and_nobody_else_follows_notifies_nobody(
        database_url: str) -> None:
    url = make_url(database_url).set(drivername="postgresql")
    dep, _ran = one_call_deployment(database_url)
    with live_server(dep, sweep_interval=3600) as srv, psycopg.connect(
            url.render_as_string(hide_password=False), autocommit=True) as listener:
        listener.execute(f"LISTEN {RUN_EVENTS_CHANNEL}")
        ids = srv.call(runs_to_the_end(srv, COUNTED), timeout=120)
        # The listener hears what is sent on the channel (so the silence below is the
        # runs'): a note sent after them arrives.
        with psycopg.connect(url.render_as_string(hide_password=False),
                             autocommit=True) as other:
            other.execute("SELECT pg_notify(%s, %s)", (RUN_EVENTS_CHANNEL, "probe 1"))
        heard = [n.payload for n in listener.notifies(timeout=1.0, stop_after=50)]
    assert "probe 1" in heard
    assert not [p for p in heard if p.partition(" ")[0] in ids], heard


def gated_deployment(database_url: str) -> tuple[Deployment, list[str]]:
    """A deployment whose agent calls one gated tool (``oa__stamp``) and then answers, and
    the list of the refs that tool ran with."""
    ran: list[str] = []

    @tool(writes=True, requires_confirmation=True)
    async def oa__stamp(ref: str) -> str:
        """Stamp a document."""
        ran.append(ref)
        return "stamped"

    agent = Agent(id="gated", name="Gated", instructions="You stamp.", tools=[oa__stamp],
                  org_id="acme", owner_user_id="alice", confirmation_mode="inline_only")
    turns = [{"tool_calls": [{"name": "oa__stamp", "args": {"ref": "r"}}]}, {"answer": "ok"}]
    dep = Deployment(
        database_url=database_url, orgs=[OrgSpec("acme", "ACME")],
        users=[UserSpec("alice", "acme", admin=True)], agents={"gated": agent},
        model_for=lambda _a: ScriptedLLM(turns))
    return dep, ran


#: A run that parks at a gated call, as the server counts it: the run accepted with its job;
#: the turn's checkpoint; the call's request or a rejection like it (one read), a standing
#: rule, the database's clock, the request made with its announcement, the approvers read;
#: the parked checkpoint; the job finished; and the session's facts: the user's request
#: kept, the facts read (the gated call's provenance). The expiry tick's job is queued by
#: the first run of a tick only.
MOST_TO_PARK = 11


@pytest.mark.perf  # a count of commits: a performance internal
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_run_parks_at_its_gate_in_few_transactions(
        database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    count = server_count(tmp_path, monkeypatch)
    dep, ran = gated_deployment(database_url)
    with live_server(dep, sweep_interval=3600) as srv:
        srv.call(runs_to_the_end(srv, WARM_UP, "gated"), timeout=60)
        before = count.transactions
        ids = srv.call(runs_to_the_end(srv, COUNTED, "gated"), timeout=120)
        after = count.transactions
    assert ran == []  # nobody decided: no call ran
    url = make_url(database_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False)) as conn:
        parked = conn.execute(
            "SELECT count(*) FROM runs r JOIN confirmation_requests c ON c.run_id = r.id "
            "WHERE r.id = ANY(%s) AND r.status = 'awaiting_approval' "
            "AND c.status = 'pending'", (ids,)).fetchone()
    assert parked == (COUNTED,)
    per_run = (after - before) / COUNTED
    assert per_run <= MOST_TO_PARK + 0.5, f"{per_run:.2f} transactions per parked run"


#: What a decision on a parked run sends until the run ends, as the server counts its
#: statements: the decider's current record; the decision's transaction on the driver (the
#: request's compare-and-set with the vote, one statement; the continuation taken; the
#: announcement, sent with the COMMIT); the run's fence taken with its state, its log read;
#: the gate's read of the request at the moment of use; the call's claim, carrying the
#: run's checkpoint with its `running` status; the result with its checkpoint, the result
#: kept as a fact; the run's end with its job. The request the decision wrote is where the
#: run resumes: it is not read again for that (14 before decision record 0021, the
#: continuation aside). The continuation taken is counted since decision record 0032
#: (before, it ran on the session's raw psycopg connection, which nothing counted: 12 then,
#: 13 with it). Since decision record 0044 (13 before): the session's facts are not read,
#: the call being decided by its request (the gate traces provenance only to judge a call
#: anew), and the status is not saved on its own beside the claim.
MOST_TO_RESUME = 11


async def approve_and_resume(srv: LiveServer, requests: list[ConfirmationRequest]) -> None:
    """Each request approved as the respond route approves it (with the request as the caller
    just read it), one at a time, each run's continuation awaited on the deciding instance."""
    runtime = srv.runtime
    for request in requests:
        await runtime.approvals.decide(request.id, "approve", Approver("alice", "acme"),
                                       read=request)
        for _ in range(1000):  # the continuation starts once the decision committed
            if runtime.queue.taken._running:
                break
            await asyncio.sleep(0)
        assert runtime.queue.taken._running, "the decision's instance did not take it"
        await asyncio.wait(set(runtime.queue.taken._running))


@pytest.mark.perf  # a count of statements: a performance internal
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_decision_resumes_its_run_from_the_request_it_wrote(
        database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    count = server_count(tmp_path, monkeypatch)
    dep, ran = gated_deployment(database_url)

    async def pending(srv: LiveServer, ids: list[str]) -> list[ConfirmationRequest]:
        return [r for run_id in ids
                for r in await srv.runtime.approvals.store.pending_for_run(run_id)]

    with live_server(dep, sweep_interval=3600) as srv:
        warm = srv.call(runs_to_the_end(srv, WARM_UP, "gated"), timeout=60)
        ids = srv.call(runs_to_the_end(srv, COUNTED, "gated"), timeout=120)
        srv.call(approve_and_resume(srv, srv.call(pending(srv, warm))), timeout=60)
        requests = srv.call(pending(srv, ids))
        assert len(requests) == COUNTED
        before = count.statements
        srv.call(approve_and_resume(srv, requests), timeout=120)
        after = count.statements
    assert ran == ["r"] * (WARM_UP + COUNTED)  # each approved call ran exactly once
    url = make_url(database_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False)) as conn:
        done = conn.execute("SELECT count(*) FROM runs WHERE id = ANY(%s) "
                            "AND status = 'completed'", (ids,)).fetchone()
    assert done == (COUNTED,)
    per_decision = (after - before) / COUNTED
    assert per_decision <= MOST_TO_RESUME + 0.5, f"{per_decision:.2f} statements per decision"


#: Of `MOST_TO_RESUME`, what still goes through SQLAlchemy's execute path: nothing. The
#: decision's transaction (its compare-and-set with the vote, the continuation taken, the
#: announcement) is the driver's, on one asyncpg connection (decision record 0032: the
#: compare-and-set went through SQLAlchemy before); the gate's read of the request takes
#: the backend's driver (one autocommit read; decision record 0028: it and the session's
#: facts, no longer read here, went through SQLAlchemy before).
MOST_TO_RESUME_THROUGH_SQLALCHEMY = 0


@pytest.mark.perf  # which path each statement takes: a performance internal
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_decision_reaches_its_tool_through_sqlalchemy_only_in_its_own_transaction(
        database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    through_engine = StatementCount(str(tmp_path / "engine.json"))
    through_driver = StatementCount(str(tmp_path / "driver.json"))
    for count in (through_engine, through_driver):
        monkeypatch.setattr(count, "start", lambda: None)  # no file to write
    monkeypatch.setattr(database, "COUNT", through_engine)
    monkeypatch.setattr(pg_driver, "COUNT", through_driver)
    dep, ran = gated_deployment(database_url)

    async def decide_each(srv: LiveServer, ids: list[str]) -> None:
        runtime = srv.runtime
        requests = [r for run_id in ids
                    for r in await runtime.approvals.store.pending_for_run(run_id)]
        assert len(requests) == len(ids)
        before = (through_engine.statements, through_driver.statements)
        await approve_and_resume(srv, requests)
        counted.append((through_engine.statements - before[0],
                        through_driver.statements - before[1]))

    counted: list[tuple[int, int]] = []
    with live_server(dep, sweep_interval=3600) as srv:
        srv.call(decide_each(srv, srv.call(runs_to_the_end(srv, WARM_UP, "gated"),
                                           timeout=60)), timeout=60)
        srv.call(decide_each(srv, srv.call(runs_to_the_end(srv, COUNTED, "gated"),
                                           timeout=120)), timeout=120)
    assert ran == ["r"] * (WARM_UP + COUNTED)
    engine, driver = (n / COUNTED for n in counted[-1])
    assert engine <= MOST_TO_RESUME_THROUGH_SQLALCHEMY + 0.5, (
        f"{engine:.2f} statements per decision through SQLAlchemy ({driver:.2f} on the "
        "driver)")
    assert engine + driver <= MOST_TO_RESUME + 0.5
