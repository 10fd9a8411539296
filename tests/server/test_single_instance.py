"""The embedded default: a SQLite file is served by one instance. A second `hookgate serve`
on the same file is refused with a message that says to use PostgreSQL, and so are the
split roles (`--no-worker`, `hookgate worker`), which need the run queue."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.instances import ROOT, Instance

CONFIG = """
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme, name: ACME}}]
users: [{{id: alice, org: acme, admin: true, token: t}}]
models: {{script: {{type: scripted, turns: [{{answer: hi}}]}}}}
agents: [{{id: a, name: A, org: acme, owner: alice, model: script}}]
"""


def hookgate(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_second_instance_on_one_sqlite_file_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "hookgate.yaml"
    config.write_text(CONFIG.format(db=tmp_path / "hookgate.db"))
    first = Instance("first", config, tmp_path)
    first.spawn()
    try:
        first.wait_up()
        second = hookgate("serve", "--config", str(config), "--port", "1")
        assert second.returncode == 2
        assert "PostgreSQL" in second.stdout + second.stderr
        assert f"pid {first.pid}" in second.stdout + second.stderr
        assert first.proc is not None and first.proc.poll() is None  # the first goes on
    finally:
        first.stop()
    # Once the first has stopped, the file is free again.
    again = Instance("again", config, tmp_path)
    again.spawn()
    try:
        again.wait_up()
    finally:
        again.stop()


def test_split_roles_need_postgresql(tmp_path: Path) -> None:
    config = tmp_path / "hookgate.yaml"
    config.write_text(CONFIG.format(db=tmp_path / "hookgate.db"))
    for args in (("serve", "--no-worker"), ("worker",)):
        result = hookgate(*args, "--config", str(config))
        assert result.returncode == 2, result
        assert "PostgreSQL" in result.stdout + result.stderr
