"""The scene's server (one per module) and the inbox emptied after each test."""

from tests.integrations.scene import empty_inbox, srv

__all__ = ["empty_inbox", "srv"]
