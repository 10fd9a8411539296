"""The Cedar policies page's worked example: its policy file, configuration and case table
are written out as a reader would, load, and every case gets the decision the page says."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from hookgate.cli.main import app
from tests.docs.samples import DOCS, blocks

PAGE = DOCS / "guides" / "policies.md"


def test_the_worked_example_holds_the_three_invariants(tmp_path: Path) -> None:
    files = [b for b in blocks(PAGE) if b.file]
    assert [b.file for b in files] == ["policies/invariants.cedar", "hookgate.yaml",
                                       "cases.yaml", "policies/vendors.cedar"]
    for block in files:
        target = tmp_path / str(block.file)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.code, encoding="utf-8")
    config = str(tmp_path / "hookgate.yaml")
    env = {"COLUMNS": "200", "NO_COLOR": "1"}

    done = CliRunner().invoke(app, ["policy", "test", str(tmp_path / "cases.yaml"),
                                    "--config", config], env=env)

    assert done.exit_code == 0, done.output
    assert "4 passed, 0 failed" in done.output
    for policy in ("big-payments", "read-only-org", "tools-allowed"):
        assert policy in done.output
    # The shadow rule of the rollout section changes no case's decision.
    assert "no-acme-payments" not in done.output
