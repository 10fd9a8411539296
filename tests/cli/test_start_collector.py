"""While `hookgate serve` starts, the garbage collector is paused; it always runs again
afterwards (never left off in a server, nor in a process whose start failed), with what the
start left alive frozen out of later collections."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hookgate.cli.start_collector import paused_until_started


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    yield
    gc.enable()
    gc.unfreeze()


def test_paused_inside_and_running_with_the_start_frozen_after() -> None:
    gc.unfreeze()
    with paused_until_started():
        assert not gc.isenabled()
        kept = [object() for _ in range(10)]
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
    assert kept


def test_running_again_after_a_failed_start() -> None:
    gc.unfreeze()
    with pytest.raises(SystemExit), paused_until_started():
        raise SystemExit(2)
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with paused_until_started():
        pass
    assert not gc.isenabled()


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_command_that_fails_to_start_leaves_the_collector_running(
        command: str, tmp_path: Path) -> None:
    from hookgate.cli.main import app

    missing = tmp_path / "missing.yaml"
    done = CliRunner().invoke(app, [command, "--config", str(missing)])
    assert done.exit_code == 2, done.output
    assert gc.isenabled()
