"""Several real `hookgate serve` processes on one PostgreSQL: starting, restarting, pausing
and SIGKILLing them while runs wait for approval, sit in a slow tool or in a slow model call
never runs a tool twice, never ends a run twice and never loses one.

Five instances start together on an empty database; two are stopped, and the tests go on
with A and B (API and worker) and C (API only, its clock 5 s behind: the decider).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic.script import ScriptDirectory

from hookgate.runs.events_bus import FOLLOW_RECHECK_S
from hookgate.storage.database import alembic_config
from tests.instances import LIBFAKETIME, Instance, MessageModel
from tests.loopback_http import HTTP
from tests.server.test_restart import wait_for
from tests.sse import read_events

TOKEN = "instances-token-alice"
#: libfaketime, to run the decider with a skewed clock.
FAKETIME = LIBFAKETIME.exists()
H = {"Authorization": f"Bearer {TOKEN}"}

CONFIG = """
database: {database}
orgs: [{{id: acme, name: ACME}}]
users:
  - {{id: alice, org: acme, admin: true, token: {token}}}
tools: [tests.instance_tools:pay, tests.instance_tools:slow_step, tests.instance_tools:note]
models:
  fake: {{type: openai, base_url: "{model_url}", api_key: k, model: m, max_retries: 0}}
agents:
  - {{id: clerk, name: Clerk, org: acme, owner: alice, model: fake,
     tools: [pay, slow_step, note], confirmation_mode: inline_only}}
  - {{id: hasty, name: Hasty, org: acme, owner: alice, model: fake, tools: [pay],
     confirmation_mode: inline_only, confirmation_timeout_s: 2, on_timeout: expire}}
  - {{id: boss, name: Boss, org: acme, owner: alice, model: fake, tools: [],
     model_config_json: {{delegates: [clerk]}}}}
worker: {{heartbeat_s: 0.5, stalled_after_s: 2.5, shutdown_grace_s: 1, poll_s: 0.5,
          expiry_tick_s: 0.5}}
"""


class Cluster:
    def __init__(self, workdir: Path, database_url: str, model: MessageModel) -> None:
        self.workdir = workdir
        self.ledger = workdir / "ledger.txt"
        self.dsn = database_url.replace("postgresql+asyncpg://", "postgresql://")
        self.config = workdir / "hookgate.yaml"
        self.config.write_text(CONFIG.format(database=database_url, token=TOKEN,
                                             model_url=model.base_url))
        self.instances: list[Instance] = []
        self.released = workdir / "released"
        self.released.mkdir()
        self._conn: psycopg.Connection[Any] | None = None

    def release(self, ref: str) -> None:
        """Ends the slow tool of run ``ref`` now, wherever it runs, instead of at 15 s."""
        (self.released / ref).touch()

    def instance(self, name: str, **kw: Any) -> Instance:
        inst = Instance(name, self.config, self.workdir,
                        env={"HOOKGATE_TEST_LEDGER": str(self.ledger),
                             "HOOKGATE_TEST_SLOW_S": "15",
                             "HOOKGATE_TEST_RELEASE_DIR": str(self.released)}, **kw)
        self.instances.append(inst)
        return inst

    def lines(self) -> list[list[str]]:
        text = self.ledger.read_text() if self.ledger.exists() else ""
        return [line.split() for line in text.splitlines()]

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        # One connection for the module's queries (autocommit: each sees what was committed
        # before it): the tests poll with them every 0.1 s, and a connection each was a
        # PostgreSQL backend started and ended each time.
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.dsn, autocommit=True)
        return self._conn.execute(sql, args).fetchall()  # type: ignore[arg-type]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory,
            postgres_server_url: str) -> Iterator[Cluster]:
    from tests.conftest import _fresh_pg_database

    model = MessageModel(slow_s=3.0)
    model.start()
    c = Cluster(tmp_path_factory.mktemp("instances"), _fresh_pg_database(postgres_server_url),
                model)
    try:
        yield c
    finally:
        for inst in c.instances:
            inst.stop()
        c.close()
        model.stop()


@pytest.fixture(scope="module")
def a(cluster: Cluster) -> Instance:
    return _started(cluster)["a"]


@pytest.fixture(scope="module")
def b(cluster: Cluster) -> Instance:
    return _started(cluster)["b"]


@pytest.fixture(scope="module")
def c(cluster: Cluster) -> Instance:
    return _started(cluster)["c"]


_STARTED: dict[str, Instance] = {}


def _started(cluster: Cluster) -> dict[str, Instance]:
    """Five instances started at once on the empty database; D and E are stopped again."""
    if not _STARTED:
        five = [cluster.instance("a"), cluster.instance("b"),
                cluster.instance("c", args=("--no-worker",),
                                 clock_offset="-5s" if FAKETIME else None),
                cluster.instance("d"), cluster.instance("e")]
        for inst in five:
            inst.spawn()
        for inst in five:
            inst.wait_up()
        _STARTED.update({i.name: i for i in five})
    return _STARTED


def start(inst: Instance, message: str, agent: str = "clerk") -> str:
    r = HTTP.post(inst.url + "/api/runs", json={"agent_id": agent, "message": message},
                  headers=H, timeout=10)
    assert r.status_code == 200, r.text
    return str(r.json()["run_id"])


def run(inst: Instance, run_id: str) -> dict[str, Any]:
    r = HTTP.get(f"{inst.url}/api/runs/{run_id}", headers=H, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def pending_for(inst: Instance, run_id: str) -> dict[str, Any] | None:
    r = HTTP.get(inst.url + "/api/confirmations?status=pending", headers=H, timeout=10)
    return next((x for x in r.json() if x["run_id"] == run_id), None)


def decide(inst: Instance, request_id: str, decision: str = "approve") -> None:
    r = HTTP.post(f"{inst.url}/api/confirmations/{request_id}/respond",
                  json={"decision": decision}, headers=H, timeout=10)
    assert r.status_code == 200, r.text


def finished(inst: Instance, run_id: str) -> bool:
    return run(inst, run_id)["status"] not in ("running", "awaiting_approval")


def ref() -> str:
    return uuid.uuid4().hex[:10]


def test_five_instances_started_together_on_an_empty_database_all_come_up(
        cluster: Cluster) -> None:
    started = _started(cluster)
    assert all(HTTP.get(i.url + "/openapi.json", timeout=5).status_code == 200
               for i in started.values())
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert cluster.query("SELECT version_num FROM alembic_version") == [(h,) for h in heads]
    assert cluster.query("SELECT id FROM users") == [("alice",)]
    assert cluster.query("SELECT count(*) FROM agents") == [(3,)]
    # Restarting is stopping and starting: D and E stop cleanly (uvicorn re-raises the
    # SIGTERM it handled), and their workers unregister: two each, the one that fetches
    # jobs and the one its own runs' taken jobs run under (executors/local_dispatch.py).
    for name in ("d", "e"):
        started[name].stop()
        assert started[name].proc is not None and started[name].proc.returncode in (0, -15)
        assert "Traceback" not in started[name].log.read_text()
    assert cluster.query("SELECT count(*) FROM procrastinate_workers") == [(4,)]


def test_a_client_on_one_instance_follows_a_run_executing_elsewhere_live_to_done(
        cluster: Cluster, a: Instance, b: Instance, c: Instance) -> None:
    # C executes no runs (--no-worker): whatever it streams comes from A or B.
    inbox: list[dict[str, Any]] = []
    events: list[str] = []
    ready = threading.Event()

    def follow_inbox() -> None:
        with HTTP.stream("GET", c.url + "/api/confirmations/events", headers=H,
                         timeout=30) as r:
            ready.set()
            for e in read_events(r):
                if e.event == "confirmation":
                    inbox.append(e.data)
                    if e.data["status"] != "pending":
                        return

    t_inbox = threading.Thread(target=follow_inbox, daemon=True)
    t_inbox.start()
    ready.wait(10)
    time.sleep(0.3)  # the stream is registered with C's notifications
    r_ = ref()
    run_id = start(c, f"pay:{r_}")

    def follow_run() -> None:
        with HTTP.stream("GET", f"{c.url}/api/runs/{run_id}/events", headers=H,
                         timeout=30) as r:
            for e in read_events(r):
                if not e.comment:
                    events.append(e.event)

    t_run = threading.Thread(target=follow_run, daemon=True)
    t_run.start()
    wait_for(lambda: "confirmation_pending" in events, "the pending event on C's stream")
    request = wait_for(lambda: pending_for(a, run_id), "the request")
    wait_for(lambda: inbox, "the request on C's inbox stream")
    assert inbox[0]["id"] == request["id"] and inbox[0]["status"] == "pending"
    decide(b, request["id"])
    t_run.join(20)
    assert not t_run.is_alive(), "C's stream did not end at done"
    assert events[-1] == "done" and events.count("done") == 1
    assert "tool_result" in events[events.index("confirmation_pending"):]
    t_inbox.join(10)
    assert [x["status"] for x in inbox] == ["pending", "approved"]
    assert [ln[:2] for ln in cluster.lines()].count(["pay", r_]) == 1


def test_a_run_its_instance_took_wakes_a_stream_elsewhere_once_that_stream_follows_it(
        cluster: Cluster, a: Instance, c: Instance) -> None:
    # A takes the run it starts, and its first advance notifies nobody until a stream in
    # another process marks the run followed (runs/events_bus.py): C's stream does, and then
    # sees the slow tool's end at once, not at its periodic re-read.
    r_ = ref()
    run_id = start(a, f"slowtool:{r_}")
    events: list[tuple[float, str]] = []

    def follow_run() -> None:
        with HTTP.stream("GET", f"{c.url}/api/runs/{run_id}/events", headers=H,
                         timeout=60) as r:
            for e in read_events(r):
                if not e.comment:
                    events.append((time.monotonic(), e.event))

    t_run = threading.Thread(target=follow_run, daemon=True)
    t_run.start()
    wait_for(lambda: ["start", r_] in [ln[:2] for ln in cluster.lines()], "the slow tool")
    wait_for(lambda: cluster.query("SELECT followed FROM runs WHERE id = %s", run_id)
             == [(True,)], "C's stream marking the run followed")
    released_at = time.monotonic()
    cluster.release(r_)
    t_run.join(30)
    assert not t_run.is_alive(), "C's stream did not end at done"
    kinds = [k for _, k in events]
    assert kinds[-1] == "done" and kinds.count("done") == 1 and "tool_result" in kinds
    # Without a notification C would only re-read every FOLLOW_RECHECK_S: done came sooner.
    assert events[-1][0] - released_at < FOLLOW_RECHECK_S / 2
    assert [ln[:2] for ln in cluster.lines()].count(["end", r_]) == 1

    # A run A took and only A streamed stays unmarked: its writes woke no other process.
    quiet = start(a, f"note:{ref()}")
    with HTTP.stream("GET", f"{a.url}/api/runs/{quiet}/events", headers=H,
                     timeout=30) as r:
        assert [e.event for e in read_events(r) if not e.comment][-1] == "done"
    assert cluster.query("SELECT followed FROM runs WHERE id = %s", quiet) == [(False,)]


def test_a_decider_whose_clock_is_behind_still_wakes_the_run_at_once(
        cluster: Cluster, a: Instance, c: Instance) -> None:
    if not FAKETIME:
        if os.environ.get("CI"):
            pytest.fail("CI is set but faketime is missing: .ci/run must install it")
        pytest.skip("no faketime on this machine (Debian package 'faketime')")
    r_ = ref()
    run_id = start(a, f"pay:{r_}")
    request = wait_for(lambda: pending_for(a, run_id), "the request")
    wait_for(lambda: run(a, run_id)["status"] == "awaiting_approval", "the run to park")
    decided = time.monotonic()
    decide(c, request["id"])  # C's clock is 5 s behind the others and the database
    wait_for(lambda: [ln for ln in cluster.lines() if ln[:2] == ["pay", r_]],
             "the payment", timeout=10)
    # Woken by the decision, not once C's clock (5 s behind) reaches the expiry it read.
    assert time.monotonic() - decided < 4.5
    [(responded, skew)] = cluster.query(
        "SELECT responded_at, extract(epoch FROM now() - responded_at) "
        "FROM confirmation_requests WHERE id = %s", request["id"])
    assert responded is not None and 0 <= float(skew) < 3  # the database's clock, not C's
    wait_for(lambda: finished(a, run_id), "the run to finish")


def test_an_expired_request_ends_its_run(cluster: Cluster, a: Instance) -> None:
    r_ = ref()
    run_id = start(a, f"pay:{r_}", agent="hasty")
    wait_for(lambda: finished(a, run_id), "the run to end after its request expired",
             timeout=20)
    state = run(a, run_id)
    assert state["status"] == "completed"
    resolved = [e for e in state["trace"] if e["type"] == "confirmation_resolved"]
    assert [e["status"] for e in resolved] == ["expired"]
    assert not [ln for ln in cluster.lines() if ln[:2] == ["pay", r_]]


def test_a_delegates_payment_parks_its_root_and_a_decision_elsewhere_pays_once(
        cluster: Cluster, a: Instance, b: Instance, c: Instance) -> None:
    refs = [ref() for _ in range(3)]
    runs = {r_: start(c, f"delegate:{r_}", agent="boss") for r_ in refs}
    def request_of(r_: str) -> dict[str, Any] | None:
        listed = HTTP.get(c.url + "/api/confirmations?status=pending", headers=H,
                          timeout=10).json()
        return next((x for x in listed if x["payload"]["args"]["ref"] == r_), None)

    requests = {r_: wait_for(lambda r_=r_: request_of(r_), "the delegate's payment request")
                for r_ in refs}
    # Each root parked: waiting, its child inside its state, no job of it queued or held.
    for r_, run_id in runs.items():
        wait_for(lambda run_id=run_id: cluster.query(
            "SELECT 1 FROM runs WHERE id = %s AND status = 'awaiting_approval' AND NOT "
            "EXISTS (SELECT 1 FROM procrastinate_jobs j WHERE j.lock = runs.id AND "
            "j.status IN ('todo', 'doing'))", run_id), f"run {r_} to park")
        assert requests[r_]["agent_id"] == "clerk" and requests[r_]["run_id"] != run_id
    for r_ in refs:
        decide(c, requests[r_]["id"])
    for r_, run_id in runs.items():
        wait_for(lambda run_id=run_id: finished(c, run_id), f"run {r_} to finish", 40)
        state = run(c, run_id)
        assert state["status"] == "completed" and state["answer"] == f"done {r_}"
        [delegated] = [e for e in state["trace"] if e["type"] == "tool_result"
                       and e["tool_name"] == "call_agent"]
        assert delegated["observation"] == f"done {r_}"
    effects = Counter((ln[0], ln[1]) for ln in cluster.lines())
    assert all(effects[("pay", r_)] == 1 for r_ in refs), effects
    done = Counter(run_id for (run_id,) in cluster.query(
        "SELECT run_id FROM run_events WHERE type = 'done' AND run_id = ANY(%s)",
        list(runs.values())))
    assert done == Counter(runs.values())


def test_killing_and_pausing_instances_never_runs_a_tool_twice_nor_loses_a_run(
        cluster: Cluster, a: Instance, b: Instance, c: Instance) -> None:
    refs = {kind: [ref() for _ in range(2)] for kind in ("pay", "slowtool", "slowmodel")}
    runs = {r_: start(c, f"{kind}:{r_}") for kind, rs in refs.items() for r_ in rs}
    # Wait until the slow tools started, the slow model calls are in flight and the
    # payments wait for approval.
    wait_for(lambda: len([ln for ln in cluster.lines() if ln[0] == "start"
                          and ln[1] in refs["slowtool"]]) == 2, "the slow tools to start")
    for r_ in refs["pay"]:
        wait_for(lambda r_=r_: pending_for(c, runs[r_]), "the payment requests")
    # The victim is an instance with a slow tool still running (a loaded machine can take
    # a while to get the payments asked for).
    ended = {ln[1] for ln in cluster.lines() if ln[0] == "end"}
    victim_pid = next(int(ln[2]) for ln in cluster.lines()
                      if ln[0] == "start" and ln[1] in refs["slowtool"] and ln[1] not in ended)
    # Whichever instance runs it: earlier tests may have left D and E up beside A and B.
    victim = next(i for i in cluster.instances if i.proc is not None
                  and i.proc.poll() is None and i.pid == victim_pid)
    victim.kill()  # SIGKILL: its slow tool, its model calls, its jobs stop mid-way
    for r_ in refs["slowtool"]:  # the tool a survivor runs ends now (the victim's is gone)
        cluster.release(r_)

    # A replacement worker (`hookgate worker`, no HTTP) comes up while the survivor takes
    # the victim's runs over.
    [(last,)] = cluster.query("SELECT coalesce(max(id), 0) FROM procrastinate_workers")
    replacement = cluster.instance("f", command="worker")
    replacement.spawn()
    wait_for(lambda: cluster.query("SELECT id FROM procrastinate_workers WHERE id > %s",
                                   last), "the replacement worker to register", 60)
    for r_ in refs["pay"]:
        decide(c, pending_for(c, runs[r_])["id"])  # type: ignore[index]
    for r_, run_id in runs.items():
        wait_for(lambda run_id=run_id: finished(c, run_id), f"run {r_} to finish", 60)

    states = {r_: run(c, run_id) for r_, run_id in runs.items()}
    assert {s["status"] for s in states.values()} == {"completed"}, states
    done = Counter(run_id for (run_id,) in cluster.query(
        "SELECT run_id FROM run_events WHERE type = 'done' AND run_id = ANY(%s)",
        list(runs.values())))
    assert done == Counter(runs.values())  # exactly one `done` per run
    effects = Counter((ln[0], ln[1]) for ln in cluster.lines())
    for r_ in refs["pay"]:
        assert effects[("pay", r_)] == 1
    for r_ in refs["slowtool"]:
        assert effects[("start", r_)] == 1  # a tool cut off by the kill is not run again
    for r_ in refs["slowmodel"]:
        assert effects[("note", r_)] == 1
    killed_mid_tool = [r_ for r_ in refs["slowtool"] if effects[("end", r_)] == 0]
    assert killed_mid_tool, "the kill did not interrupt a slow tool"
    for r_ in killed_mid_tool:
        observations = [e["observation"] for e in states[r_]["trace"]
                        if e["type"] == "tool_result"]
        assert any("outcome is unknown" in o for o in observations)


def test_a_worker_wrongly_declared_dead_writes_nothing_after_the_takeover(
        cluster: Cluster, c: Instance) -> None:
    # Every instance still running a worker may take the run (C runs none); run alone,
    # this test finds D and E still up, as the first test did not stop them.
    live = [i for i in cluster.instances if i.name != "c"
            and i.proc is not None and i.proc.poll() is None]
    r_ = ref()
    run_id = start(c, f"slowtool:{r_}")
    started = wait_for(lambda: [ln for ln in cluster.lines() if ln[:2] == ["start", r_]],
                       "the slow tool to start")
    zombie = next(i for i in live if i.pid == int(started[0][2]))
    zombie.signal(signal.SIGSTOP)  # no heartbeats: the others declare it dead
    try:
        wait_for(lambda: finished(c, run_id), "the takeover to finish the run", 30)
    finally:
        cluster.release(r_)  # the tool ends as soon as the zombie runs again
        zombie.signal(signal.SIGCONT)
    before = run(c, run_id)
    # The zombie wakes up inside its tool call: the tool finishes (it ran once), but its
    # result, its events and its checkpoint are refused.
    wait_for(lambda: [ln for ln in cluster.lines() if ln[:2] == ["end", r_]],
             "the zombie's tool to return")
    wait_for(lambda: "was taken over" in zombie.log.read_text(), "the zombie to be fenced")
    after = run(c, run_id)
    assert after["status"] == before["status"] == "completed"
    assert after["trace"] == before["trace"]
    assert [t for (t,) in cluster.query(
        "SELECT type FROM run_events WHERE run_id = %s", run_id)].count("done") == 1
    assert Counter(ln[0] for ln in cluster.lines() if ln[1] == r_)["start"] == 1
    assert json.dumps(after).count("stepped") == 0  # the zombie's result never landed


@pytest.fixture(scope="module")
def helper(cluster: Cluster) -> Instance:
    """A `hookgate worker` (no HTTP) beside the instances the two tests below stop, to take
    their runs over. Started once for both (a start costs ~1 CPU-s): each test leaves it as
    it found it, running, with nothing of its own in flight once its run finished; the
    module's end stops it."""
    worker = cluster.instance("h", command="worker")
    worker.spawn()
    return worker


def _slow_run_on_a_new_instance(cluster: Cluster, name: str) -> tuple[Instance, str, str]:
    """A new serving instance, and a slow-tool run started on it, checked to run there,
    its tool started."""
    taker = cluster.instance(name)
    taker.spawn()
    taker.wait_up()
    r_ = ref()
    run_id = start(taker, f"slowtool:{r_}")
    started = wait_for(lambda: [ln for ln in cluster.lines() if ln[:2] == ["start", r_]],
                       "the slow tool to start")
    assert int(started[0][2]) == taker.pid  # it runs where it was started
    return taker, r_, run_id


@pytest.mark.usefixtures("helper")
def test_a_run_its_own_instance_took_moves_on_when_that_instance_is_killed(
        cluster: Cluster, c: Instance) -> None:
    # A run started on an instance that runs a worker advances there: its job is inserted
    # already "doing" under that instance's own registered worker, its fence at 1, and no
    # other worker fetches it. Killed mid-tool, the instance stops heartbeating; the job
    # is a dead worker's like any other, another worker takes the run over (fence 2) and
    # finishes it without running the tool again.
    taker, r_, run_id = _slow_run_on_a_new_instance(cluster, "g")
    [(status, worker_id, job_args)] = cluster.query(
        "SELECT status, worker_id, args FROM procrastinate_jobs WHERE lock = %s", run_id)
    assert status == "doing" and job_args == {"run_id": run_id}
    assert cluster.query("SELECT id FROM procrastinate_workers WHERE id = %s", worker_id)
    assert cluster.query("SELECT fence FROM runs WHERE id = %s", run_id) == [(1,)]
    # Taken, never queued: procrastinate logged no "deferred" event for it.
    assert cluster.query("SELECT type FROM procrastinate_events e JOIN procrastinate_jobs j "
                         "ON j.id = e.job_id WHERE j.lock = %s", run_id) == []
    taker.kill()
    wait_for(lambda: finished(c, run_id), "another worker to finish the run", 60)
    state = run(c, run_id)
    assert state["status"] == "completed", state
    assert Counter(ln[0] for ln in cluster.lines() if ln[1] == r_)["start"] == 1
    assert any("outcome is unknown" in e["observation"] for e in state["trace"]
               if e["type"] == "tool_result")
    assert [t for (t,) in cluster.query(
        "SELECT type FROM run_events WHERE run_id = %s", run_id)].count("done") == 1
    [(fence,)] = cluster.query("SELECT fence FROM runs WHERE id = %s", run_id)
    assert fence >= 2  # taken over, so whatever the dead instance had in flight is refused


@pytest.mark.usefixtures("helper")
def test_a_run_its_own_instance_took_moves_on_when_that_instance_stops_cleanly(
        cluster: Cluster, c: Instance) -> None:
    # A stopping instance lets its taken runs finish for shutdown_grace_s (1 s here), then
    # cancels them: each queues its run's continuation and ends its own job, so another
    # worker goes on at once instead of after the stalled-worker timeout, and the stopped
    # instance leaves no job "doing" behind.
    taker, r_, run_id = _slow_run_on_a_new_instance(cluster, "k")
    taker.stop()  # SIGTERM, inside the 15 s tool
    assert taker.proc is not None and taker.proc.returncode in (0, -15)
    assert "Traceback" not in taker.log.read_text()
    # Its job ended as "aborted" (kept, as procrastinate keeps unsuccessful jobs), none
    # is left "doing" without a worker, and the continuation it queued is there (or done).
    statuses = [s_ for (s_,) in cluster.query(
        "SELECT status FROM procrastinate_jobs WHERE lock = %s AND "
        "(worker_id IS NULL OR status <> 'doing')", run_id)]
    assert "aborted" in statuses and "doing" not in statuses
    wait_for(lambda: finished(c, run_id), "another worker to finish the run", 60)
    state = run(c, run_id)
    assert state["status"] == "completed", state
    assert Counter(ln[0] for ln in cluster.lines() if ln[1] == r_)["start"] == 1
    assert [t for (t,) in cluster.query(
        "SELECT type FROM run_events WHERE run_id = %s", run_id)].count("done") == 1


@pytest.mark.usefixtures("helper")
def test_a_decision_whose_instance_is_killed_as_it_answers_still_pays_once(
        cluster: Cluster, c: Instance) -> None:
    # The decision's own transaction takes the run's continuation for the deciding
    # instance (a job inserted "doing" under its worker, started once the decision commits:
    # decision record 0032). Killed the moment the decision is answered, before or while
    # that continuation runs, the instance stops heartbeating: its job is a dead worker's,
    # another worker takes the run over and ends it, the payment made exactly once.
    taker = cluster.instance("q")
    taker.spawn()
    taker.wait_up()
    r_ = ref()
    run_id = start(taker, f"pay:{r_}")
    request = wait_for(lambda: pending_for(c, run_id), "the payment request")
    wait_for(lambda: cluster.query(
        "SELECT 1 FROM runs WHERE id = %s AND status = 'awaiting_approval'", run_id) and not
        cluster.query("SELECT 1 FROM procrastinate_jobs WHERE lock = %s "
                      "AND status IN ('todo', 'doing')", run_id), "the run to park")
    decide(taker, request["id"])  # type: ignore[index]
    taker.kill()
    assert cluster.query("SELECT status FROM confirmation_requests WHERE id = %s",
                         request["id"]) == [("approved",)]  # type: ignore[index]
    wait_for(lambda: finished(c, run_id), "another worker to finish the run", 60)
    state = run(c, run_id)
    assert state["status"] == "completed", state
    assert Counter((ln[0], ln[1]) for ln in cluster.lines())[("pay", r_)] == 1
    assert [t for (t,) in cluster.query(
        "SELECT type FROM run_events WHERE run_id = %s", run_id)].count("done") == 1
    # The dead worker's job, retried, finds the run ended: none is left to do.
    wait_for(lambda: cluster.query("SELECT count(*) FROM procrastinate_jobs WHERE lock = %s "
                                   "AND status IN ('todo', 'doing')", run_id) == [(0,)],
             "no job of the run left", 60)


def test_gated_runs_an_instance_took_pay_only_as_decided_elsewhere(
        cluster: Cluster, c: Instance) -> None:
    # Payments started on an instance that takes its runs park there at the gate; the
    # decisions are made on the API-only instance, a second approval of the same request
    # is refused, and each payment runs exactly as decided: the approved one once, the
    # rejected one never.
    taker = cluster.instance("m")
    taker.spawn()
    taker.wait_up()
    yes, no = ref(), ref()
    runs = {r_: start(taker, f"pay:{r_}") for r_ in (yes, no)}
    requests = {r_: wait_for(lambda r_=r_: pending_for(c, runs[r_]), "the payment request")
                for r_ in runs}
    decide(c, requests[yes]["id"])
    again = HTTP.post(f"{c.url}/api/confirmations/{requests[yes]['id']}/respond",
                      json={"decision": "approve"}, headers=H, timeout=10)
    assert again.status_code == 409, again.text
    decide(c, requests[no]["id"], "reject")
    for r_, run_id in runs.items():
        wait_for(lambda run_id=run_id: finished(c, run_id), f"run {r_} to finish", 40)
    effects = Counter((ln[0], ln[1]) for ln in cluster.lines())
    assert effects[("pay", yes)] == 1 and effects[("pay", no)] == 0, effects
    assert run(c, runs[yes])["status"] == "completed"
    assert [t for (t,) in cluster.query(
        "SELECT type FROM run_events WHERE run_id = ANY(%s)", list(runs.values()))
            ].count("done") == 2
    taker.stop()
