"""Fixtures for the coding-agent tests: the channel fakes and secrets key of tests/channels,
a dead URL, and hookgate serving the agent ``coder`` (per test, or per module for the tests
whose every call is refused)."""

from collections.abc import Iterator

import pytest

from tests.channels.conftest import secrets_key, slack
from tests.claude_code.scene import coder
from tests.coding_agents.failing_hookgate import dead_url
from tests.conftest import BACKENDS, migrated_database_url
from tests.live_server import LiveServer, live_server

__all__ = ["dead_url", "refusing", "secrets_key", "slack", "srv"]


@pytest.fixture
def srv(database_url: str) -> Iterator[LiveServer]:
    """hookgate serving the scenes' agent ``coder``, waiting 0.3 s for a person."""
    deployment = coder(wait_s=0.3)
    deployment.database_url = database_url
    with live_server(deployment) as server:
        yield server


@pytest.fixture(scope="module", params=BACKENDS)
def refusing(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[LiveServer]:
    """`srv`'s server, one per module and backend, for tests whose every call is refused
    before anything is stored (a body hookgate cannot act on, a bad token, an unknown
    agent): none leaves a request, call or row that another of them could meet."""
    deployment = coder(wait_s=0.3)
    deployment.database_url = migrated_database_url(request, tmp_path_factory.mktemp("refusing"))
    with live_server(deployment) as server:
        yield server
