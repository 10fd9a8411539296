"""A command line that names a command registers that command's module alone (`hookgate
serve` builds no other command's options), and reads exactly as with every command
registered: the same help, the same errors; COMMAND_MODULES names each command's module."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hookgate.cli.main import COMMAND_MODULES

ENV = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=ENV, timeout=120)


def test_each_module_registers_the_commands_listed_for_it() -> None:
    # One process: each module imported afresh onto an emptied app, its registrations read.
    code = f"""
import importlib, json, sys
from typer.main import get_command_name
from hookgate.cli.app import app
found = {{}}
for module in sorted(set({list(COMMAND_MODULES.values())!r})):
    for name in [n for n in sys.modules if n.startswith("hookgate.cli.") and n.endswith("_cmd")]:
        del sys.modules[name]
    app.registered_commands.clear()
    app.registered_groups.clear()
    importlib.import_module("hookgate.cli." + module)
    found[module] = sorted(
        [c.name or get_command_name(c.callback.__name__) for c in app.registered_commands]
        + [g.name for g in app.registered_groups])
print(json.dumps(found))
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr
    found: dict[str, list[str]] = json.loads(done.stdout)
    for command, module in COMMAND_MODULES.items():
        assert command in found[module], f"{module} does not register {command}"
    every = {name for names in found.values() for name in names}
    assert every == set(COMMAND_MODULES), "a command is registered but not listed"


def test_serve_loads_no_other_commands_module() -> None:
    code = """
import json, sys
from hookgate.cli.main import main
try:
    main(["serve", "--help"])
except SystemExit:
    pass
print(json.dumps(sorted(n for n in sys.modules if n.startswith("hookgate.cli.")
                        and n.endswith("_cmd"))))
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == ["hookgate.cli.serve_cmd"]


@pytest.mark.parametrize("args", [
    ["serve", "--help"], ["serve", "--bogus"], ["check", "--help"], ["logout", "--help"],
    ["db", "--help"], ["mcp"], ["--help"], [], ["serv"],
], ids=lambda a: " ".join(a) or "nothing")
def test_a_command_line_reads_as_with_every_command_registered(args: list[str]) -> None:
    lazy = subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args],
                          capture_output=True, text=True, env=ENV, timeout=120)
    full = _python("import sys\nfrom hookgate.cli.main import app\n"
                   f"app({args!r}, prog_name='hookgate')")
    assert (lazy.returncode, lazy.stdout, lazy.stderr) == (
        full.returncode, full.stdout, full.stderr)
    assert lazy.stdout or lazy.stderr
