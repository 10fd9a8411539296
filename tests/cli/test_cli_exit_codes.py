"""Exit codes as the help says them, run as real `hookgate` subprocesses: `run` exits 1 when
the model called a tool the agent does not have (its help: 0 means every call ran), and
`serve` exits 2 for a configuration it cannot use, as its help names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.instances import Instance

REPO = Path(__file__).resolve().parents[2]

CONFIG = """
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme}}]
users: [{{id: alice, org: acme}}]
tools: [hookgate.examples.purchasing:oa__list_vendors]
models:
  script:
    type: scripted
    turns:
      - tool_calls: [{{name: {tool}, args: {{}}}}]
      - answer: done
agents:
  - id: buyer
    org: acme
    owner: alice
    model: script
    tools: [oa__list_vendors]
"""


def hookgate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    env.update(COLUMNS="100", NO_COLOR="1",
               PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=120)


def _config(tmp_path: Path, tool: str) -> Path:
    path = tmp_path / f"{tool}.yaml"
    path.write_text(CONFIG.format(db=tmp_path / "hookgate.db", tool=tool), encoding="utf-8")
    return path


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def test_run_exits_1_when_the_model_called_a_tool_the_agent_does_not_have(
        tmp_path: Path) -> None:
    done = hookgate("run", "--config", str(_config(tmp_path, "oa__delete_vendor")),
                    "--agent", "buyer", "go", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    out = _flat(done.stdout)
    assert "REJECTED oa__delete_vendor did not run" in out
    assert "run completed; 1 tool call(s) did not run (unknown tool or invalid arguments)" \
        in out
    helped = _flat(hookgate("run", "--help", cwd=tmp_path).stdout)
    assert "Exit code 0 when the run completed and every tool call it made ran" in helped
    assert "or a call did not run because the model named a tool the agent does not have" \
        in helped

    # Every call ran: 0.
    ok = hookgate("run", "--config", str(_config(tmp_path, "oa__list_vendors")),
                  "--agent", "buyer", "go", cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_serve_exits_as_its_help_says(tmp_path: Path) -> None:
    helped = _flat(hookgate("serve", "--help", cwd=tmp_path).stdout)
    assert ("2 when the command or its configuration cannot be used: a usage error, a "
            "configuration file that is missing or invalid") in helped
    assert "or a SQLite file another instance already serves" in helped

    # A configuration that does not load: 2, as the help says.
    bad = tmp_path / "bad.yaml"
    bad.write_text("orgs: [{id: acme}]\nagents: 3\n", encoding="utf-8")
    done = hookgate("serve", "--config", str(bad), "--port", "1", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    missing = hookgate("serve", "--config", str(tmp_path / "nope.yaml"), cwd=tmp_path)
    assert missing.returncode == 2, missing.stderr

    # A SQLite file another instance serves: 2, as the help says.
    config = _config(tmp_path, "oa__list_vendors")
    first = Instance("first", config, tmp_path)
    first.spawn()
    try:
        first.wait_up()
        second = hookgate("serve", "--config", str(config), "--port", "1", cwd=tmp_path)
        assert second.returncode == 2, second.stderr
    finally:
        first.stop()
