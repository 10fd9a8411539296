"""Every code sample in the documentation runs or loads as written: Python blocks are
executed (a page's blocks in order, in one namespace, as a reader pastes them), YAML, JSON
and TOML blocks parse, and full configurations load through hookgate's own loader. Only
blocks marked ``<!-- sample: skip -->`` (fragments) are left out, and there are few."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import tomllib
import types
from functools import cache
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hookgate.config.loader import parse_config
from tests.docs.samples import DOCS, Block, blocks, pages

RUNNABLE = {"python", "yaml", "json", "toml"}
#: Frameworks whose adapter is tested in an environment of its own (their pins clash with
#: hookgate's dev extras): a page importing one runs there and is skipped elsewhere.
OWN_ENVIRONMENT = {"crewai": "bash scripts/crewai_env.sh"}


def _page_id(page: Path) -> str:
    return str(page.relative_to(DOCS.parent))


PAGES_WITH_PYTHON = [p for p in pages()
                     if any(b.lang == "python" and b.sample is None and b.file is None
                            for b in blocks(p))]


@pytest.mark.parametrize("page", PAGES_WITH_PYTHON, ids=_page_id)
def test_the_python_samples_of_a_page_run(page: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    code = "\n".join(b.code for b in blocks(page) if b.lang == "python")
    for name, where in OWN_ENVIRONMENT.items():
        if re.search(rf"^(from|import) {name}\b", code, re.M) and \
                importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed here: this page's samples run in its own "
                        f"environment ({where})")
    monkeypatch.chdir(tmp_path)
    # The samples run as a module a reader would run, importable by its name (a sample may
    # declare one of its own classes as "module:Class").
    module = types.ModuleType("docs_sample")
    monkeypatch.setitem(sys.modules, "docs_sample", module)
    namespace = module.__dict__
    ran = 0
    for block in blocks(page):
        if block.lang != "python" or block.sample is not None or block.file is not None:
            continue
        code = compile(block.code, block.where, "exec")
        exec(code, namespace)
        ran += 1
    assert ran > 0


def _data_blocks() -> list[Block]:
    return [b for p in pages() for b in blocks(p)
            if b.lang in {"yaml", "json", "toml"} and b.sample != "skip"]


@pytest.mark.parametrize("block", _data_blocks(), ids=lambda b: b.where)
def test_the_yaml_json_and_toml_samples_parse(block: Block) -> None:
    if block.lang == "yaml":
        data = yaml.safe_load(block.code)
    elif block.lang == "json":
        data = json.loads(block.code)
    else:
        data = tomllib.loads(block.code)
    assert isinstance(data, dict | list), f"{block.where} is not a mapping or a list"
    if block.sample == "config":
        parse_config(block.code, source=block.where)


def test_every_sample_is_run_or_marked() -> None:
    """A block in a language the tests run is run, or carries a marker saying how it is
    covered; the markers are the known kinds, and fragments stay few."""
    kinds = {None, "skip", "shell", "tutorial", "config"}
    every = [b for p in pages() for b in blocks(p)]
    assert len([b for b in every if b.lang in RUNNABLE]) >= 30
    for block in every:
        assert block.sample in kinds, f"{block.where}: unknown sample kind {block.sample!r}"
        assert block.lang, f"{block.where}: a fence needs a language"
    skipped = [b.where for b in every if b.sample == "skip"]
    assert len(skipped) <= 12, skipped


@cache
def _help(path: tuple[str, ...]) -> str | None:
    from hookgate.cli.main import app

    done = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    return done.output if done.exit_code == 0 else None


def _commands() -> list[tuple[str, str]]:
    """(where, command line) for each `hookgate ...` line of the shell samples."""
    found = []
    for page in pages():
        for block in blocks(page):
            if block.lang not in {"bash", "sh", "shell"}:
                continue
            for line in block.code.replace("\\\n", " ").splitlines():
                for part in re.split(r"&&|;|\|\||\$\(", line):
                    part = part.strip()
                    if part.startswith("hookgate ") or part == "hookgate":
                        found.append((block.where, part.split("#")[0].strip()))
    return found


def test_every_hookgate_command_in_the_docs_exists_with_its_options() -> None:
    commands = _commands()
    assert len(commands) >= 10
    for where, line in commands:
        words = [w.rstrip(')\"\'') for w in line.split()[1:]]
        path: list[str] = []
        for word in words:
            if not re.fullmatch(r"[a-z][a-z-]*", word) or _help((*path, word)) is None:
                break
            path.append(word)
        text = _help(tuple(path))
        assert text is not None, f"{where}: {line}"
        rest = words[len(path):]
        is_group = "COMMAND" in text[:300]
        if rest and re.fullmatch(r"[a-z][a-z-]*", rest[0]) and is_group:
            raise AssertionError(f"{where}: 'hookgate {' '.join(path)}' has no command {rest[0]}")
        for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", line):
            assert option in text, f"{where}: 'hookgate {' '.join(path)}' has no {option}"
