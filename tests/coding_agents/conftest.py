"""Fixtures for the coding-agent tests: the channel fakes and secrets key of tests/channels."""

from tests.channels.conftest import secrets_key, slack

__all__ = ["secrets_key", "slack"]
