"""The policies' database fixture (users alice and bob in org acme) and a fresh policy
folder per test, for the Cedar tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.policies.fixtures import pdb, policy_db_url

__all__ = ["pdb", "policy_db_url"]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "policies"
