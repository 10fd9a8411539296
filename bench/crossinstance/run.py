"""``bench/approval.py --cross-instance``: the approval gate across hookgate instances.

Three real `hookgate serve` processes on one PostgreSQL database: A and B execute runs, C
serves the API only and takes the decisions. It measures
  - decision-to-tool-start: from just before `POST /respond` on C to the first line of the
    tool on A or B (p50, p99), one decision at a time, with 10,000 other runs waiting;
  - database statements per second while runs wait (pg_stat_statements, all instances and
    the queue's workers together, top-level statements without BEGIN/COMMIT; transactions
    from pg_stat_database beside them), with a handful of runs waiting and with 10,000;
  - the resident memory of each instance while 10,000 runs wait.
By default it starts a throwaway PostgreSQL cluster (scripts/pgcluster.py) with
pg_stat_statements loaded; ``--postgres URL`` uses an existing server instead, where only
transactions are counted unless that server loads pg_stat_statements.
The 10,000 waiting runs are clones of one real parked run (its checkpoint and its pending
request, their expiries spread over an hour, and the expiry jobs of those ticks): a parked
run is exactly those rows and nothing else.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg

from hookgate.runs.executors.queue import EXPIRE_TASK, expiry_tick
from hookgate.runs.executors.settings import WorkerSettings

BENCH = Path(__file__).resolve().parent.parent
TOKEN = "bench-token"
#: The clones' expiries spread over this long (the default timeout is an hour).
SPREAD_S = 3600.0
EXPIRY_TICK_S = WorkerSettings().expiry_tick_s
H = {"Authorization": f"Bearer {TOKEN}"}

CONFIG = """
database: {database}
orgs: [{{id: acme, name: ACME}}]
users: [{{id: alice, org: acme, admin: true, token: {token}}}]
tools: [crossinstance.tools:stamp]
models:
  script: {{type: scripted, turns: [{{tool_calls: [{{name: stamp, args: {{ref: r}}}}]}},
                                   {{answer: stamped}}]}}
agents:
  - {{id: clerk, name: Clerk, org: acme, owner: alice, model: script, tools: [stamp],
     confirmation_mode: inline_only}}
"""


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    def __init__(self, config: Path, stamps: Path, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "HOOKGATE_BENCH_STAMPS": str(stamps),
               "PYTHONPATH": str(BENCH) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hookgate.cli.main", "serve", "--config", str(config),
             "--port", str(self.port), "--log-level", "warning", *args],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait_up(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("an instance exited at start")
            try:
                if httpx.get(self.url + "/openapi.json", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("an instance did not come up")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def fresh_database(server: str) -> tuple[str, str]:
    name = "bench_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = server.rsplit("/", 1)[0]
    return f"{base}/{name}", name


def transactions(dsn: str, name: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database "
                           "WHERE datname = %s", (name,)).fetchone()
    assert row is not None
    return int(row[0])


#: Transaction control, not queries (pg_stat_statements counts them as statements).
CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "SET ", "SELECT 1")


def has_statements(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute("SELECT pg_stat_statements_reset()")
        except psycopg.Error:
            return False
    return True


def statements(dsn: str) -> dict[str, int]:
    """Calls per statement text of this database so far (the bench's own reads aside)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT query, sum(calls)::bigint FROM pg_stat_statements s "
            "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database() "
            "AND query NOT LIKE '%%pg_stat_%%' GROUP BY query").fetchall()
    return {str(q): int(n) for q, n in rows}


def costliest(dsn: str, decisions: int) -> list[dict[str, Any]]:
    """The statements that took the most database time while deciding, per decision."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT query, sum(calls)::bigint, sum(total_exec_time) FROM pg_stat_statements s "
            "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database() "
            "AND query NOT LIKE '%%pg_stat_%%' GROUP BY query ORDER BY 3 DESC LIMIT 6"
        ).fetchall()
    return [{"ms": round(float(t) / decisions, 2), "calls": round(int(n) / decisions, 2),
             "query": " ".join(str(q).split())[:160]} for q, n, t in rows]


#: Seconds to let the database settle before an idle measurement (see ``idle_rate``).
SETTLE_S = 11.0


def idle_rate(dsn: str, name: str, seconds: float, counted: bool,
              settle_s: float = SETTLE_S) -> dict[str, Any]:
    # Let the burst of the change before settle (each inserted job notifies the workers,
    # which look for a due job once); pg_stat_database also reports with a delay (an idle
    # backend flushes its counters after up to 10 s), pg_stat_statements at once.
    time.sleep(settle_s)
    before = transactions(dsn, name)
    calls = statements(dsn) if counted else {}
    time.sleep(seconds)
    after = transactions(dsn, name)
    out: dict[str, Any] = {}
    if not counted:  # lags: an idle backend reports its transactions up to 10 s late
        out["transactions_per_s"] = round(max(0.0, (after - before - 1) / seconds), 2)
    else:
        delta = {q: n - calls.get(q, 0) for q, n in statements(dsn).items()}
        queries = {q: n for q, n in delta.items()
                   if n > 0 and not q.lstrip().upper().startswith(CONTROL)}
        out["queries_per_s"] = round(sum(queries.values()) / seconds, 2)
        out["statements_per_s"] = round(sum(n for n in delta.values() if n > 0) / seconds, 2)
        out["top_queries"] = [{"per_s": round(n / seconds, 2), "query": " ".join(q.split())[:160]}
                              for q, n in sorted(queries.items(), key=lambda x: -x[1])[:6]]
    return out


def clone_waiting(dsn: str, template_run: str, n: int) -> None:
    with psycopg.connect(dsn) as conn:
        req = conn.execute("SELECT id FROM confirmation_requests WHERE run_id = %s",
                           (template_run,)).fetchone()
        assert req is not None
        conn.execute("""
            INSERT INTO runs (id, agent_id, org_id, user_id, conversation_id, engine, status,
                              state_json, answer, error, created_at, updated_at, fence)
            SELECT 'clone_' || g, agent_id, org_id, user_id, conversation_id, engine, status,
                   replace(state_json, %(run)s, 'clone_' || g), answer, error, created_at,
                   updated_at, 0
              FROM runs, generate_series(1, %(n)s) g WHERE id = %(run)s""",
                     {"run": template_run, "n": n})
        conn.execute("""
            INSERT INTO confirmation_requests
            SELECT (json_populate_record(r, json_build_object(
                        'id', 'cr_clone_' || g, 'run_id', 'clone_' || g,
                        'expires_at', r.expires_at + g * %(spread)s::float8 * interval '1 second'))).*
              FROM confirmation_requests r, generate_series(1, %(n)s) g WHERE r.id = %(req)s
            """, {"req": req[0], "n": n, "spread": SPREAD_S / n})
        # Their expiry jobs, as parking them would have queued: one per tick.
        due = sorted({expiry_tick(row[0], EXPIRY_TICK_S) for row in conn.execute(
            "SELECT expires_at FROM confirmation_requests WHERE id LIKE 'cr_clone_%%'")})
        template = conn.execute(
            "SELECT queueing_lock FROM procrastinate_jobs WHERE task_name = %s",
            (EXPIRE_TASK,)).fetchone()
        assert template is not None
        for tick in due:
            conn.execute("""
                INSERT INTO procrastinate_jobs (queue_name, task_name, priority, lock,
                                                queueing_lock, args, status, scheduled_at)
                SELECT queue_name, task_name, priority, lock, %(lock)s,
                       jsonb_build_object('due', %(due)s::text), status, %(at)s
                  FROM procrastinate_jobs WHERE queueing_lock = %(template)s
                ON CONFLICT DO NOTHING""", {"lock": f"expire:{tick.isoformat()}",
                                            "due": tick.isoformat(), "at": tick,
                                            "template": template[0]})
        conn.commit()


def pending_ids(url: str) -> list[str]:
    r = httpx.get(url + "/api/confirmations?status=pending&limit=500", headers=H, timeout=30)
    return [x["id"] for x in r.json() if not x["id"].startswith("cr_clone_")]


def run(server_url: str, waiting: int, samples: int, idle_s: float,
        settle_s: float = SETTLE_S) -> dict[str, Any]:
    libpq = server_url.replace("postgresql+asyncpg://", "postgresql://")
    dsn, name = fresh_database(libpq)
    work = Path(tempfile.mkdtemp(prefix="hookgate-bench-"))
    stamps = work / "stamps.txt"
    config = work / "hookgate.yaml"
    config.write_text(CONFIG.format(database=dsn, token=TOKEN))
    instances = [Serve(config, stamps), Serve(config, stamps),
                 Serve(config, stamps, "--no-worker")]
    a, b, c = instances
    try:
        for inst in instances:
            inst.wait_up()
        counted = has_statements(dsn)
        run_ids = []
        for i in range(samples + 1):
            r = httpx.post((a if i % 2 else b).url + "/api/runs",
                           json={"agent_id": "clerk", "message": "stamp"}, headers=H,
                           timeout=30)
            run_ids.append(r.json()["run_id"])
        deadline = time.monotonic() + 120
        while len(pending_ids(c.url)) < samples + 1:
            if time.monotonic() > deadline:
                raise RuntimeError("the runs did not all reach the gate")
            time.sleep(0.2)
        # Every run parked: checkpointed as waiting, and no job of it queued or running.
        while True:
            with psycopg.connect(dsn, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT (SELECT count(*) FROM runs WHERE status = 'awaiting_approval'),"
                    " (SELECT count(*) FROM procrastinate_jobs WHERE task_name = %s"
                    "  AND status IN ('todo', 'doing'))", ("hookgate.advance_run",)).fetchone()
            if row == (samples + 1, 0):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the runs did not all park: {row}")
            time.sleep(0.5)
        idle_few = idle_rate(dsn, name, idle_s, counted, settle_s)
        clone_waiting(dsn, run_ids[0], waiting)
        idle_many = idle_rate(dsn, name, idle_s, counted, settle_s)
        rss = {n: round(i.rss_mb(), 1) for n, i in zip("ABC", instances, strict=True)}

        if counted:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("SELECT pg_stat_statements_reset()")
        latencies: list[float] = []
        responded: list[float] = []
        # The decider holds one keep-alive connection to C, as the web inbox does: a client
        # built per request would time its own construction (an SSL context, ~25 ms).
        decider = httpx.Client(base_url=c.url, headers=H, timeout=30)
        decider.get("/api/confirmations", params={"status": "pending", "limit": 1})
        for request_id in pending_ids(c.url)[:samples]:
            seen = len(stamps.read_text().splitlines()) if stamps.exists() else 0
            t0 = time.time()
            r = decider.post(f"/api/confirmations/{request_id}/respond",
                             json={"decision": "approve"})
            assert r.status_code == 200, r.text
            responded.append((time.time() - t0) * 1000)
            while True:
                lines = stamps.read_text().splitlines() if stamps.exists() else []
                if len(lines) > seen:
                    latencies.append((float(lines[-1]) - t0) * 1000)
                    break
                time.sleep(0.0005)
        decider.close()
        costly = costliest(dsn, len(latencies)) if counted else []
        return {
            "instances": "A, B: serve (API + worker); C: serve --no-worker (decides)",
            "waiting_runs": waiting,
            "decision_to_tool_start_ms": {
                "p50": round(statistics.median(latencies), 1),
                "p99": round(pct(latencies, 99), 1), "max": round(max(latencies), 1),
                "decisions": len(latencies)},
            "respond_request_ms": {"p50": round(statistics.median(responded), 1),
                                   "p99": round(pct(responded, 99), 1)},
            "db_idle": {f"{samples + 1}_waiting": idle_few, f"{waiting}_waiting": idle_many},
            "rss_mb_while_waiting": rss,
            "costliest_queries_per_decision": costly,
        }
    finally:
        for inst in instances:
            inst.stop()
        with psycopg.connect(libpq, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main(args: Any) -> None:
    sys.path.insert(0, str(BENCH.parent / "scripts"))
    import pgcluster

    cluster = None
    server = args.postgres
    if not server:  # a cluster of its own: pg_stat_statements, and no other load on it
        cluster = Path(tempfile.mkdtemp(prefix="hookgate-bench-pg-"))
        server = pgcluster.start(cluster, settings={
            "shared_preload_libraries": "pg_stat_statements"})
    try:
        settle = SETTLE_S if args.settle is None else args.settle
        result = run(server, args.waiting, args.decisions, args.idle or 30.0, settle)
    finally:
        if cluster is not None:
            pgcluster.stop(cluster)
    print(json.dumps({"benchmark": "approval --cross-instance",
                      "python": sys.version.split()[0],
                      # A shared machine's load moves the latencies: say what it was.
                      "load_average_1m": round(os.getloadavg()[0], 2),
                      "cpus": os.cpu_count(),
                      "targets": {"decision_to_tool_start_p99_ms": 50,
                                  "db_queries_per_s_idle": 5},
                      "result": result}, indent=2))
