"""The adversarial tally for the adapters' attack tests (tests/adversarial_tally.py)."""

from __future__ import annotations

import pytest

from tests.adversarial_tally import TALLY, Tally


@pytest.fixture
def attempt() -> Tally:
    return TALLY
