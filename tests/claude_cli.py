"""Drive the real Claude Code CLI (pinned in scripts/install_claude_code.sh) offline.

``claude_binary()`` installs it into .cache/claude-code through npm when it is missing
(as .ci/run does) and returns its path; ``ClaudeRun`` runs ``claude -p`` in a project
directory with an isolated HOME, pointed at a loopback fake of the Messages API.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.interpreter_path import path_with_interpreter

REPO = Path(__file__).resolve().parent.parent
INSTALLER = REPO / "scripts" / "install_claude_code.sh"


@functools.cache
def claude_binary() -> str:
    """The CLI's path; installs it first if needed. Skips only when npm itself is missing."""
    try:
        done = subprocess.run(["bash", str(INSTALLER)], capture_output=True, text=True,
                              timeout=900, check=True)
    except FileNotFoundError:
        pytest.skip("bash is not available to install Claude Code")
    except subprocess.CalledProcessError as exc:
        if "npm: command not found" in exc.stderr:
            pytest.skip("npm is not installed; .ci/run installs it")
        raise
    return done.stdout.strip().splitlines()[-1]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.stdout)
        return data


class ClaudeRun:
    """One project directory and HOME for a series of CLI runs."""

    def __init__(self, project: Path, home: Path, api_url: str) -> None:
        self.project = project
        self.home = home
        self.api_url = api_url
        project.mkdir(parents=True, exist_ok=True)
        home.mkdir(parents=True, exist_ok=True)
        (home / "tmp").mkdir(exist_ok=True)

    def settings(self, settings: dict[str, Any]) -> None:
        target = self.project / ".claude" / "settings.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(settings, indent=2))

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            "PATH": path_with_interpreter(),
            "HOME": str(self.home),
            "TMPDIR": str(self.home / "tmp"),
            "ANTHROPIC_BASE_URL": self.api_url,
            "ANTHROPIC_API_KEY": "sk-ant-test-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "IS_SANDBOX": "1",
        }
        if "PYTHONPATH" in os.environ:
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        env.update(extra or {})
        return env

    def run(self, *args: str, env: dict[str, str] | None = None,
            timeout: float = 60) -> Result:
        cmd = [claude_binary(), *args, "--output-format", "json",
               "--model", "claude-sonnet-4-5"]
        done = subprocess.run(cmd, cwd=self.project, env=self.env(env), capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        return Result(done.returncode, done.stdout, done.stderr)

    def prompt(self, text: str, *, tools: str = "Bash,Write,Edit",
               env: dict[str, str] | None = None) -> Result:
        return self.run("-p", text, "--allowedTools", tools, env=env)
