"""Sync Python hooks for tests/hooks/test_hook_isolation.py: one hangs until released."""

from __future__ import annotations

import threading
from typing import Any

release = threading.Event()


def hang(payload: dict[str, Any]) -> None:
    """Hang until the test sets ``release`` (at most 30 s)."""
    release.wait(30)


def quick(payload: dict[str, Any]) -> None:
    """Answer at once: allow."""
