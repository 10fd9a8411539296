"""The policies' fixtures (tests/policies/fixtures.py) and a fresh policy folder per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.policies.fixtures import pdb, policy_db_url

__all__ = ["pdb", "policy_db_url"]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "policies"
