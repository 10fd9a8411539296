"""Attempts to keep or get back a live stream with a token that was revoked while a stream was
open: reopening it through the header or the query, with look-alike spellings of the token,
through the run stream or the MCP gateway. Every one must be refused."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.adversarial_tally import Tally
from tests.live_server import live_server
from tests.server.demo_world import TOKENS, auth, world

pytestmark = pytest.mark.both_databases


def look_alikes(token: str) -> dict[str, dict[str, str] | str]:
    """Ways to send ``token`` again: headers, or a raw query string."""
    return {
        "header": {"Authorization": f"Bearer {token}"},
        "header, lower-case scheme and inner padding": {"Authorization": f"bearer   {token}"},
        "query": f"access_token={token}",
        "query with padding": f"access_token=%20%20{token}%09",
        "query upper-cased": f"access_token={token.upper()}",
        "query with a zero-width space": f"access_token={token}%E2%80%8B",
        "query with a lone surrogate's bytes": f"access_token={token}%ED%B2%80",
        "query twice, revoked token last": f"access_token=nope&access_token={token}",
    }


def test_a_token_revoked_under_an_open_stream_gets_no_stream_back(
        database_url: str, attempt: Tally) -> None:
    deployment, _ = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        opened, ended = threading.Event(), threading.Event()
        statuses: list[int] = []

        def hold() -> None:
            with httpx.Client(timeout=httpx.Timeout(10, read=60)) as reader, \
                    reader.stream("GET", f"{srv.url}/api/confirmations/events",
                                  params={"access_token": TOKENS["bob"]}) as resp:
                statuses.append(resp.status_code)
                opened.set()
                for _line in resp.iter_lines():
                    pass
            ended.set()

        threading.Thread(target=hold, daemon=True).start()
        # Revoked only once the stream is open: the attack is on a stream that outlives it.
        assert opened.wait(30) and statuses == [200], statuses
        r = c.post("/api/users/bob/revoke", headers=auth("alice"))
        assert r.status_code == 200, r.text
        ended_in_time = ended.wait(20)
        attempt.record("a stream opened by query token outlives its revocation",
                       not ended_in_time)
        assert ended_in_time
        for how, sent in look_alikes(TOKENS["bob"]).items():
            for path in ("/api/confirmations/events", "/api/runs/any/events"):
                got = c.get(path, headers=sent) if isinstance(sent, dict) \
                    else c.get(f"{path}?{sent}")
                attempt.record(f"revoked token again ({how}) on {path}",
                               got.status_code != 401)
                assert got.status_code == 401, (how, path, got.status_code)
