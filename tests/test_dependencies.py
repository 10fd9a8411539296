"""Every package hookgate's code imports is declared where it is used, so that a fresh
machine gets it from the README's install alone: the core's imports in the core's
dependencies (or, for an optional interface, in its extra), and everything the tests,
benches, scripts and docs samples import in the ``dev`` extra — by name, not because some
other package happens to bring it today."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Third-party packages imported where their extra's environment is not this one (CrewAI
#: pins mcp<2 and runs in scripts/crewai_env.sh), with the extra that declares them.
ELSEWHERE = {"crewai": "crewai"}


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(requirements: list[str]) -> set[str]:
        return {_norm(re.match(r"[A-Za-z0-9_.-]+", r).group(0))  # type: ignore[union-attr]
                for r in requirements}

    return names(project["dependencies"]), {
        extra: names(reqs) for extra, reqs in project["optional-dependencies"].items()}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imports(folder: str) -> Iterator[tuple[str, Path]]:
    for path in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module]
            else:
                continue
            for mod in mods:
                top = mod.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("hookgate", "tests",
                                                                      "__future__"):
                    yield top, path


def _undeclared(folders: tuple[str, ...], allowed: set[str]) -> list[str]:
    owners = importlib.metadata.packages_distributions()
    _core, extras = _declared()
    missing = set()
    for folder in folders:
        for top, path in _imports(folder):
            if top in ELSEWHERE:
                assert _norm(top) in extras[ELSEWHERE[top]], top
                continue
            dists = {_norm(d) for d in owners.get(top, ())}
            if not dists:  # one of the repository's own helper modules (bench/, scripts/)
                assert any(p.stem == top for p in ROOT.rglob(f"{top}.py")) or \
                    (ROOT / "bench" / top).is_dir() or (ROOT / "tests" / top).is_dir(), \
                    f"{path.relative_to(ROOT)} imports '{top}', which nothing installs"
                continue
            if not dists & allowed:
                missing.add(f"{top} ({', '.join(sorted(dists))}) in {path.relative_to(ROOT)}")
    return sorted(missing)


def test_every_package_the_tests_benches_and_scripts_import_is_in_the_dev_extra() -> None:
    _core, extras = _declared()
    assert _undeclared(("tests", "bench", "scripts", "docs"), extras["dev"]) == []


def test_every_package_the_library_imports_is_in_its_dependencies_or_an_extra() -> None:
    core, extras = _declared()
    allowed = core | set().union(*(v for k, v in extras.items() if k != "dev"))
    assert _undeclared(("src",), allowed) == []


def test_the_dev_extra_is_a_plain_list_any_reader_can_take() -> None:
    # One quoted requirement a line, no comment inside the list and no extras in brackets:
    # a checker that reads pyproject.toml line by line sees every package the tests need.
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = text[text.index("\ndev = [\n") + len("\ndev = [\n"):]
    lines = block[:block.index("\n]\n")].splitlines()
    plain = re.compile(r'^  "[A-Za-z0-9][A-Za-z0-9._-]*(?:[<>=!~][^"\[\]]*)?",$')
    assert [line for line in lines if not plain.match(line)] == []


def _readme_test_command() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [command] = [line for line in readme.splitlines()
                 if "pip install" in line and "pytest" in line and not line.startswith("`")]
    return command.strip()


def test_the_readme_test_command_installs_into_the_projects_own_environment() -> None:
    # On a fresh machine `pip` and `python` may be different interpreters (Debian's pip
    # beside another Python, or no `python` at all), and the machine's site-packages may
    # hold what the tests import: the command makes and enters `.venv` first, so the install
    # and the test run share one interpreter that has only what the extras bring.
    command = _readme_test_command()
    steps = [step.strip() for step in command.split("&&")]
    assert steps == ["python3 -m venv .venv", ". .venv/bin/activate",
                     "pip install -e '.[dev]'", "python -m pytest -n 4"], command


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert _readme_test_command() in [line.strip() for line in ci]
