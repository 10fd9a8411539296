"""The deployment the sign-in tests serve: the demo world (org acme, a purchasing agent whose
calls over 50,000 wait for approval) with ``oidc:`` pointing at a provider on loopback."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from hookgate.runtime.deployment import Deployment
from tests.live_server import LiveServer, free_port, live_server
from tests.oidc.provider import MockProvider, spec
from tests.portal.steps import WAIT_S
from tests.server.demo_world import Ledger, auth, world

ALICE_ORG = {"org": "acme", "groups": ["approvers"], "email": "carol@acme.example",
             "name": "Carol"}


def oidc_world(database_url: str, provider: MockProvider, port: int, *,
               scope: str = "org_members", **overrides: Any) -> tuple[Deployment, Ledger]:
    deployment, bank = world(database_url, scope=scope)
    url = f"http://127.0.0.1:{port}"
    # Audited: each call's row names who decided it.
    buyer = dataclasses.replace(deployment.agents["buyer"],
                                model_config_json={"hooks": {"class_hooks": ["audit_log"]}})
    return dataclasses.replace(deployment, public_url=url, agents={"buyer": buyer},
                               oidc=spec(provider, **overrides)), bank


@contextmanager
def serving(database_url: str, provider: MockProvider, **overrides: Any
            ) -> Iterator[tuple[LiveServer, Ledger]]:
    port = free_port()
    deployment, bank = oidc_world(database_url, provider, port, **overrides)
    with live_server(deployment, port=port) as srv:
        yield srv, bank


def pending_request(c: httpx.Client) -> dict[str, Any]:
    """alice (an API token) starts a run whose payment waits for approval: the request."""
    c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
           headers=auth("alice")).raise_for_status()
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = c.get("/api/confirmations", params={"status": "pending"},
                      headers=auth("alice")).json()
        if found:
            return dict(found[0])
        time.sleep(0.05)
    raise AssertionError("no pending request appeared")
