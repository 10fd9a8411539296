"""Streams between instances woken through Redis pub/sub (``redis_url``): real `hookgate
serve` processes on a real PostgreSQL and a real redis-server.

A executes runs; B (``--no-worker``) only serves the API. A client on B follows A's run live
to ``done`` and sees A's request on B's inbox stream, and the wake-ups are on Redis. With
Redis stopped, streams still reach ``done`` (they re-read the log periodically) and no tool
runs twice; once Redis is back, wake-ups flow again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate.runs.events_bus import FOLLOW_RECHECK_S
from hookgate.runs.redis_wakeups import PREFIX
from hookgate.runtime.inbox import REQUESTS_CHANNEL
from hookgate.storage.run_events import RUN_EVENTS_CHANNEL
from tests.instances import Instance, MessageModel
from tests.redis_server import RedisServer, running_redis
from tests.server.test_instances import CONFIG, TOKEN, H, decide, pending_for, ref, start
from tests.server.test_restart import wait_for
from tests.sse import read_events


class Pair:
    def __init__(self, workdir: Path, redis: RedisServer, a: Instance, b: Instance) -> None:
        self.workdir = workdir
        self.redis = redis
        self.a = a
        self.b = b
        self.ledger = workdir / "ledger.txt"

    def paid(self, r: str) -> int:
        text = self.ledger.read_text() if self.ledger.exists() else ""
        return [line.split()[:2] for line in text.splitlines()].count(["pay", r])


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, postgres_server_url: str) -> Iterator[Pair]:
    from tests.conftest import _fresh_pg_database

    with running_redis() as redis:
        model = MessageModel()
        model.start()
        workdir = tmp_path_factory.mktemp("redis-streams")
        config = workdir / "hookgate.yaml"
        config.write_text(CONFIG.format(database=_fresh_pg_database(postgres_server_url),
                                        token=TOKEN, model_url=model.base_url)
                          + f"redis_url: {redis.url}\n")
        env = {"HOOKGATE_TEST_LEDGER": str(workdir / "ledger.txt")}
        a = Instance("a", config, workdir, env=env)
        b = Instance("b", config, workdir, args=("--no-worker",), env=env)
        try:
            a.spawn()
            b.spawn()
            a.wait_up()
            b.wait_up()
            yield Pair(workdir, redis, a, b)
        finally:
            a.stop()
            b.stop()
            model.stop()


class Follower:
    """B's run stream and inbox stream, each read by a thread."""

    def __init__(self, b: Instance, *, inbox: bool = True) -> None:
        self.b = b
        self.events: list[tuple[float, str]] = []
        self.inbox: list[dict[str, Any]] = []
        self._inbox_ready = threading.Event()
        self._inbox: threading.Thread | None = None
        if inbox:
            self._inbox = threading.Thread(target=self._follow_inbox, daemon=True)
            self._inbox.start()
            assert self._inbox_ready.wait(10)
            time.sleep(0.3)  # registered with B's subscription
        self._run: threading.Thread | None = None

    def _follow_inbox(self) -> None:
        with httpx.stream("GET", self.b.url + "/api/confirmations/events", headers=H,
                          timeout=60) as r:
            self._inbox_ready.set()
            for e in read_events(r):
                if e.event == "confirmation":
                    self.inbox.append(e.data)
                    if e.data["status"] != "pending":
                        return

    def follow(self, run_id: str) -> None:
        def go() -> None:
            with httpx.stream("GET", f"{self.b.url}/api/runs/{run_id}/events", headers=H,
                              timeout=60) as r:
                for e in read_events(r):
                    if not e.comment:
                        self.events.append((time.monotonic(), e.event))

        self._run = threading.Thread(target=go, daemon=True)
        self._run.start()

    def join(self, timeout: float) -> None:
        assert self._run is not None
        self._run.join(timeout)
        assert not self._run.is_alive(), "B's run stream did not end at done"
        if self._inbox is not None:
            self._inbox.join(10)
            assert not self._inbox.is_alive(), "B's inbox stream did not show the decision"

    def types(self) -> list[str]:
        return [t for _, t in self.events]


class RedisWatcher:
    """Subscribes to hookgate's channels on Redis, as an instance does."""

    def __init__(self, url: str) -> None:
        import redis

        self._pubsub = redis.Redis.from_url(url).pubsub(ignore_subscribe_messages=True)
        self._pubsub.subscribe(PREFIX + RUN_EVENTS_CHANNEL, PREFIX + REQUESTS_CHANNEL)
        self.seen: list[tuple[str, str]] = []

    def drain(self) -> list[tuple[str, str]]:
        # get_message answers None for a subscription's confirmation too: read until quiet.
        quiet_until = time.monotonic() + 0.5
        while time.monotonic() < quiet_until:
            m = self._pubsub.get_message(timeout=0.1)
            if m is not None:
                self.seen.append((m["channel"].decode(), m["data"].decode()))
                quiet_until = time.monotonic() + 0.5
        return self.seen

    def close(self) -> None:
        self._pubsub.close()


def test_a_client_on_b_follows_a_run_on_a_live_woken_through_redis(pair: Pair) -> None:
    watcher = RedisWatcher(pair.redis.url)
    follower = Follower(pair.b)
    r_ = ref()
    run_id = start(pair.b, f"pay:{r_}")
    follower.follow(run_id)
    wait_for(lambda: "confirmation_pending" in follower.types(), "the pending event on B")
    request = wait_for(lambda: pending_for(pair.b, run_id), "the request")
    wait_for(lambda: follower.inbox, "the request on B's inbox stream")
    decided_at = time.monotonic()
    decide(pair.b, request["id"])
    follower.join(30)

    types = follower.types()
    assert types[-1] == "done" and types.count("done") == 1
    assert "tool_result" in types[types.index("confirmation_pending"):]
    # Without a wake-up B would only re-read every FOLLOW_RECHECK_S: done came sooner.
    done_at = follower.events[-1][0]
    assert done_at - decided_at < FOLLOW_RECHECK_S / 2
    assert [x["status"] for x in follower.inbox] == ["pending", "approved"]
    assert pair.paid(r_) == 1
    # The wake-ups went through Redis: the run's events and both request changes.
    seen = watcher.drain()
    watcher.close()
    # Each says how far the run's log was written ("RUN_ID SEQ").
    notes = [p for c, p in seen if c == PREFIX + RUN_EVENTS_CHANNEL
             and p.partition(" ")[0] == run_id]
    assert notes and all(p.partition(" ")[2].isdigit() for p in notes), seen
    requests = [p for c, p in seen if c == PREFIX + REQUESTS_CHANNEL and request["id"] in p]
    assert len(requests) >= 2  # created, then approved


def subscribers(url: str) -> int:
    """How many connections are subscribed to the run events' channel on Redis."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        [(_, count)] = client.pubsub_numsub(PREFIX + RUN_EVENTS_CHANNEL)
        return int(count)
    finally:
        client.close()


def test_with_redis_down_streams_still_reach_done_and_nothing_runs_twice(pair: Pair) -> None:
    instances = subscribers(pair.redis.url)
    assert instances >= 1
    pair.redis.stop()
    try:
        r_ = ref()
        run_id = start(pair.b, f"pay:{r_}")
        request = wait_for(lambda: pending_for(pair.b, run_id), "the request")
        follower = Follower(pair.b, inbox=False)
        follower.follow(run_id)
        wait_for(lambda: "confirmation_pending" in follower.types(), "the replay on B")
        decide(pair.b, request["id"])
        follower.join(FOLLOW_RECHECK_S * 2 + 10)  # with Redis down: by the re-reads
        types = follower.types()
        assert types[-1] == "done" and types.count("done") == 1
        assert pair.paid(r_) == 1
    finally:
        pair.redis.start()
    # Redis is back: the instances subscribe again (they retry every second) and wake-ups
    # flow as before.
    wait_for(lambda: subscribers(pair.redis.url) == instances, "the instances to subscribe")
    watcher = RedisWatcher(pair.redis.url)
    r2 = ref()
    run_id = start(pair.b, f"pay:{r2}")
    wait_for(lambda: any(c == PREFIX + RUN_EVENTS_CHANNEL and p.partition(" ")[0] == run_id
                         for c, p in watcher.drain()),
             "a wake-up on Redis after it came back")
    watcher.close()
