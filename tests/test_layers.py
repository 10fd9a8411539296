"""The package layering holds: the import contracts in pyproject.toml ([tool.importlinter],
run by ``lint-imports`` in CI) pass on the source tree, and they are not vacuous: the same
contracts refuse a copy of the tree in which a low layer imports a channel again, or the
approvals or the matching module import the hook catalog."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT = ("import sys\nfrom importlinter.cli import lint_imports\n"
        "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))")


def lint(src: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LINT, str(ROOT / "pyproject.toml")],
                          cwd=src, env={"PATH": "", "PYTHONPATH": str(src)},
                          capture_output=True, text=True, timeout=120)


def lint_with(tmp_path: Path, module_path: str, line: str) -> subprocess.CompletedProcess[str]:
    """The contracts run on a copy of the source with ``line`` added to the module at
    ``module_path`` (under ``hookgate/``)."""
    shutil.copytree(ROOT / "src" / "hookgate", tmp_path / "hookgate",
                    ignore=shutil.ignore_patterns("__pycache__", "static"))
    module = tmp_path / "hookgate" / module_path
    module.write_text(module.read_text() + line)
    return lint(tmp_path)


def test_no_package_imports_one_above_it() -> None:
    run = lint(ROOT / "src")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def test_telemetry_importing_the_channels_masking_again_breaks_the_contract(
        tmp_path: Path) -> None:
    run = lint_with(tmp_path, "telemetry/values.py",
                    "\nfrom hookgate.channels.masking import render_args\n")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "hookgate.telemetry is not allowed to import hookgate.channels" in run.stdout


def test_the_approvals_importing_the_catalog_again_breaks_the_contract(tmp_path: Path) -> None:
    run = lint_with(tmp_path, "approvals/context.py",
                    "\nfrom hookgate.catalog.declarative.protocol import apply_reply\n")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "hookgate.approvals is not allowed to import hookgate.catalog" in run.stdout


def test_the_matching_module_importing_the_catalog_breaks_the_contract(tmp_path: Path) -> None:
    run = lint_with(tmp_path, "matching.py",
                    "\nfrom hookgate.catalog import build\n")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "hookgate.matching is not allowed to import hookgate.catalog" in run.stdout


def test_a_module_outside_storage_importing_sqlalchemy_breaks_the_contract(
        tmp_path: Path) -> None:
    run = lint_with(tmp_path, "approvals/rules.py",
                    "\nfrom sqlalchemy import select\n")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "hookgate.approvals.rules -> sqlalchemy" in run.stdout


def test_the_server_importing_the_mcp_gateway_breaks_the_independence_of_the_interfaces(
        tmp_path: Path) -> None:
    run = lint_with(tmp_path, "server/app.py",
                    "\nfrom hookgate.mcp import http\n")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "hookgate.server is not allowed to import hookgate.mcp" in run.stdout


def test_the_runs_importing_the_runtime_that_builds_them_breaks_the_contract(
        tmp_path: Path) -> None:
    run = lint_with(tmp_path, "runs/runner.py",
                    "\nfrom hookgate.runtime import deployment\n")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "hookgate.runs is not allowed to import hookgate.runtime" in run.stdout
