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


@pytest.fixture(autouse=True)
def secrets_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """The key the provider's refresh tokens are sealed with (servers started in a test, and
    their subprocesses, read it from the environment)."""
    from hookgate.runtime.channel_records import SECRETS_KEY_ENV, SecretsKey

    key = SecretsKey.generate()
    monkeypatch.setenv(SECRETS_KEY_ENV, key)
    return key
