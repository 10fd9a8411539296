"""What a one-call run commits on PostgreSQL (``pg_stat_database.xact_commit``): the run
accepted with its job; the call claimed with the model's turn; the result with the
checkpoint after it; the run's end; its job finished (docs/development/durable-path.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import psycopg
import pytest
from sqlalchemy.engine import make_url

from hookgate import Agent, ScriptedLLM, tool
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec
from tests.live_server import LiveServer, live_server

#: Runs before the counted ones (a connection's first statements: asyncpg's type reads).
WARM_UP = 3
COUNTED = 40
#: The run's own commits, each named in the docs with the invariant it protects.
MOST_PER_RUN = 5


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


async def runs_to_the_end(srv: LiveServer, n: int) -> list[str]:
    """``n`` runs one after another, each awaited until its job is finished; their ids."""
    runtime = srv.runtime
    ids: list[str] = []
    for _ in range(n):
        state = await runtime.runs.start("clerk", "note it", user_id="alice", org_id="acme")
        running = set(runtime.queue.taken._running)
        assert running, "the run was not taken by this instance"
        await asyncio.wait(running)
        ids.append(state.run_id)
    return ids


def libpq(database_url: str, database: str | None = None) -> str:
    url = make_url(database_url).set(drivername="postgresql")
    return url.set(database=database or url.database).render_as_string(hide_password=False)


def committed(database_url: str) -> Callable[[], int]:
    """Reads the database's ``xact_commit`` from the server's ``postgres`` database (a
    reading commits nothing in the database read), once every backend has flushed."""
    name = make_url(database_url).database
    admin = libpq(database_url, "postgres")

    def read() -> int:
        last = -1
        with psycopg.connect(admin, autocommit=True) as conn:
            for _ in range(100):
                conn.execute("SELECT pg_stat_clear_snapshot()")
                row = conn.execute("SELECT xact_commit FROM pg_stat_database "
                                   "WHERE datname = %s", (name,)).fetchone()
                value = int(row[0]) if row else 0
                if value == last:
                    return value
                last = value
                time.sleep(0.1)  # exited backends flush their counters as they go
        return last
    return read


@pytest.mark.perf  # a count of commits: a performance internal
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_one_call_run_commits_at_most_five_times(database_url: str) -> None:
    read = committed(database_url)
    dep, ran = one_call_deployment(database_url)
    with psycopg.connect(libpq(database_url), autocommit=True) as conn:
        # The cluster's own upkeep of this database's tables is not the run's: off here.
        for (table,) in conn.execute("SELECT tablename FROM pg_tables "
                                     "WHERE schemaname = 'public'").fetchall():
            conn.execute(f'ALTER TABLE "{table}" SET (autovacuum_enabled = false)')

    def serve(runs: int) -> int:
        before = read()
        # No expiry sweeps (each one a read) in between: only the runs' own commits.
        with live_server(dep, sweep_interval=3600) as srv:
            ids = srv.call(runs_to_the_end(srv, runs), timeout=120)
        spent = read() - before  # every connection closed: every counter flushed
        with psycopg.connect(libpq(database_url)) as conn:
            done = conn.execute("SELECT count(*) FROM runs WHERE id = ANY(%s) "
                                "AND status = 'completed'", (ids,)).fetchone()
        assert done == (runs,)
        print("spent", runs, spent)
        return spent

    # The same start, warm-up and stop, without and with the counted runs.
    alone = serve(WARM_UP)
    with_runs = serve(WARM_UP + COUNTED)
    assert ran == ["x"] * (2 * WARM_UP + COUNTED)  # each call's tool ran exactly once
    per_run = (with_runs - alone) / COUNTED
    assert per_run <= MOST_PER_RUN + 0.5, f"{per_run:.2f} commits per one-call run"
