"""The approval tests' fixtures: the approval service over the test's database, the same
one the engine tests use (tests/engines/world.py)."""

from __future__ import annotations

from tests.engines.world import approvals

__all__ = ["approvals"]
