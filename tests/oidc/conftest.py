"""Fixtures of the sign-in tests: a provider on loopback whose signing keys the test holds."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.oidc.keys import KeyServer


@pytest.fixture
def keys() -> Iterator[KeyServer]:
    server = KeyServer()
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


# A real OpenTelemetry SDK for the test that reads a decision's span.
from tests.telemetry.conftest import otel  # noqa: E402, F401
