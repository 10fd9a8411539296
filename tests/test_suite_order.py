"""The files the suite runs first (tests/conftest.py LONG_FIRST) exist: a renamed file would
silently drop back to the end of the run, where the workers wait for it alone."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONG_FIRST

ROOT = Path(__file__).resolve().parents[1]


def test_every_file_run_first_exists_once() -> None:
    assert len(set(LONG_FIRST)) == len(LONG_FIRST)
    missing = [name for name in LONG_FIRST if not (ROOT / name).is_file()]
    assert missing == []
