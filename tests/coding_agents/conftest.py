"""Fixtures for the coding-agent tests: the channel fakes and secrets key of tests/channels."""

from tests.channels.conftest import secrets_key, slack
from tests.coding_agents.failing_hookgate import dead_url

__all__ = ["dead_url", "secrets_key", "slack"]
