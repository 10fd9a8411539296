"""The Cedar policies guide's steps run as written, on a new database: its files written
into an empty folder, then every shell block (`check`, `policy test|schema`, `run`, `policy
reload|status`) with bash; `run`'s call is decided by the policies (the declared users are
written as `serve` writes them). The page names every execution path a policy can see."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import get_args

from hookgate.tools.calls import ExecutionPath
from tests.docs.samples import DOCS, REPO, blocks

PAGE = DOCS / "guides" / "policies.md"


def test_the_guide_runs_as_written_on_a_new_database(tmp_path: Path) -> None:
    page = blocks(PAGE)
    for block in (b for b in page if b.file):
        target = tmp_path / str(block.file)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.code, encoding="utf-8")
    steps = [b for b in page if b.sample == "tutorial"]
    assert len(steps) == 3 and not (tmp_path / "hookgate.db").exists()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),
           "COLUMNS": "250", "NO_COLOR": "1"}
    prelude = f'hookgate() {{ "{sys.executable}" -m hookgate.cli.main "$@"; }}\nset -e\n'

    said = []
    for block in steps:
        done = subprocess.run(["bash", "-c", prelude + block.code], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{block.where}:\n{done.stdout}\n{done.stderr}"
        said.append(done.stdout)

    tests_and_run, reload_and_status, shadow_replay_enforce = said
    assert "4 passed, 0 failed" in tests_and_run
    assert "policy allow by tools-allowed" in tests_and_run
    assert "Paid 12,000.00 to ACME" in tests_and_run
    assert "stamped" in reload_and_status and "in force" in reload_and_status
    assert (tmp_path / "policies.version").read_text().startswith("cedar-")
    # Shadow → replay → enforce: the run recorded the shadow rule's verdict and ran; replay
    # says the enforced candidate changes that payment, and --ci fails on it.
    assert "no-acme-payments" in shadow_replay_enforce
    assert "allow → deny" in shadow_replay_enforce
    assert "exit 1: decisions would change" in shadow_replay_enforce
    report = json.loads((tmp_path / "replay.json").read_text())
    assert report["ci"] and report["changed"] == 1
    assert report["changes"][0]["rule"] == "no-acme-payments"
    assert "stamped" in shadow_replay_enforce.split("would change")[-1]


def test_the_guide_lists_every_execution_path() -> None:
    text = PAGE.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if "`context.execution_path`" in line)
    for path in get_args(ExecutionPath):
        assert f"`{path}`" in row, path
    assert "an undeclared external tool is denied" in text.lower()
