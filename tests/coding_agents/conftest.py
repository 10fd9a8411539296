"""Fixtures for the coding-agent tests: the channel fakes and secrets key of tests/channels,
a dead URL, and hookgate serving the agent ``coder``."""

from collections.abc import Iterator

import pytest

from tests.channels.conftest import secrets_key, slack
from tests.claude_code.scene import coder
from tests.coding_agents.failing_hookgate import dead_url
from tests.live_server import LiveServer, live_server

__all__ = ["dead_url", "secrets_key", "slack", "srv"]


@pytest.fixture
def srv(database_url: str) -> Iterator[LiveServer]:
    """hookgate serving the scenes' agent ``coder``, waiting 0.3 s for a person."""
    deployment = coder(wait_s=0.3)
    deployment.database_url = database_url
    with live_server(deployment) as server:
        yield server
