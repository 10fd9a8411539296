"""The test suite cleans up after itself: a throwaway PostgreSQL cluster's data directory is
deleted when it stops, and a passed test's tmp_path folder does not outlive the test."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pgcluster  # scripts/ is on sys.path (tests/conftest.py)
import pytest

REPO = Path(__file__).resolve().parents[1]


def test_stopping_a_cluster_deletes_its_data_directory() -> None:
    if pgcluster.find_bindir() is None:
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl) on this machine")
    datadir = Path(tempfile.mkdtemp(prefix="hookgate-pg-cleanup-"))
    os.chmod(datadir, 0o755)
    try:
        url = pgcluster.start(datadir)
        assert url.startswith("postgresql+asyncpg://postgres@127.0.0.1:")
        assert (datadir / "data" / "PG_VERSION").exists()
    finally:
        pgcluster.stop(datadir)

    assert not datadir.exists()


def test_the_stop_command_deletes_the_directory_unless_told_to_keep_it(tmp_path: Path) -> None:
    kept, removed = tmp_path / "kept", tmp_path / "removed"
    for d in (kept, removed):
        d.mkdir()
        (d / "server.log").write_text("log")
    script = str(REPO / "scripts" / "pgcluster.py")

    subprocess.run([sys.executable, script, "stop", str(kept), "--keep"], check=True)
    subprocess.run([sys.executable, script, "stop", str(removed)], check=True)

    assert (kept / "server.log").exists() and not removed.exists()


SAMPLE = '''
def test_passes(tmp_path):
    (tmp_path / "hookgate.db").write_bytes(b"x" * 1024)


def test_fails(tmp_path):
    (tmp_path / "hookgate.db").write_bytes(b"x")
    assert False
'''


def test_only_failed_tests_keep_their_tmp_path(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    basetemp = tmp_path / "basetemp"

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir",
         str(tmp_path), "-p", "no:cacheprovider", "-p", "no:xdist", f"--basetemp={basetemp}",
         "-q", str(tmp_path / "test_sample.py")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)

    assert "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    kept = sorted(p.name for p in basetemp.iterdir() if not p.is_symlink())
    assert kept == ["test_fails0"]  # the passed test's folder went with it
