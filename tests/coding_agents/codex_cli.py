"""Drive the real Codex CLI (pinned in scripts/install_codex.sh) headless and offline.

``codex_binary()`` installs it into .cache/codex through npm when it is missing (as .ci/run
does); ``CodexRun`` runs ``codex exec`` in a project directory with an isolated CODEX_HOME
and HOME, whose only model provider is a loopback fake of the Responses API.
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.interpreter_path import path_with_interpreter

REPO = Path(__file__).resolve().parents[2]
INSTALLER = REPO / "scripts" / "install_codex.sh"
API_KEY = "sk-test-codex"


@functools.cache
def npm_cli(installer: Path) -> str:
    """The path of the CLI a scripts/install_*.sh installs (first, if needed). Skips only
    when npm itself is missing."""
    try:
        done = subprocess.run(["bash", str(installer)], capture_output=True, text=True,
                              timeout=900, check=True)
    except subprocess.CalledProcessError as exc:
        if "npm: command not found" in exc.stderr:
            pytest.skip("npm is not installed; .ci/run installs it")
        raise
    return done.stdout.strip().splitlines()[-1]


def codex_binary() -> str:
    """The pinned Codex CLI's path."""
    return npm_cli(INSTALLER)


#: The user configuration: the fake as the only provider, nothing that reaches out.
CONFIG = """\
model = "gpt-5-codex"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.fake]
name = "fake"
base_url = "{base_url}"
env_key = "FAKE_OPENAI_KEY"
wire_api = "responses"

[features]
plugins = false
remote_plugin = false
apps = false

[analytics]
enabled = false

[otel]
exporter = "none"
trace_exporter = "none"
metrics_exporter = "none"
"""


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


class CodexRun:
    """One project directory, CODEX_HOME and HOME for a series of CLI runs."""

    def __init__(self, project: Path, home: Path, base_url: str) -> None:
        self.project = project
        self.home = home
        self.codex_home = home / ".codex"
        project.mkdir(parents=True, exist_ok=True)
        self.codex_home.mkdir(parents=True, exist_ok=True)
        (home / "tmp").mkdir(exist_ok=True)
        (self.codex_home / "config.toml").write_text(CONFIG.format(base_url=base_url))
        # Codex looks for the project root by its .git; a bare marker folder is enough.
        (project / ".git").mkdir(exist_ok=True)

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            "PATH": path_with_interpreter(),
            "HOME": str(self.home),
            "CODEX_HOME": str(self.codex_home),
            "TMPDIR": str(self.home / "tmp"),
            "FAKE_OPENAI_KEY": API_KEY,
        }
        if "PYTHONPATH" in os.environ:
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        env.update(extra or {})
        return env

    def run(self, prompt: str = "go", *args: str, env: dict[str, str] | None = None,
            timeout: float = 90) -> Result:
        cmd = [codex_binary(), "exec", "--skip-git-repo-check", "--ephemeral", *args, prompt]
        done = subprocess.run(cmd, cwd=self.project, env=self.env(env), capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        return Result(done.returncode, done.stdout, done.stderr)
