"""Drive the real GitHub Copilot CLI (pinned in scripts/install_copilot_cli.sh) headless and
offline, in its BYOK mode.

``copilot_binary()`` installs it into .cache/copilot through npm when it is missing (as
.ci/run does); ``CopilotRun`` runs ``copilot -p`` in a project (a git repository) with an
isolated HOME and COPILOT_HOME, whose only model is a loopback fake of Chat Completions with
streaming. The package unpacks ~235 MB on its first start: COPILOT_CACHE_HOME is
.cache/copilot-cache, shared by every run. ``GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS`` is set
only where a test says so (``repo_hooks``): without it ``copilot -p`` skips the
repository's hooks silently. The CLI turns on Node's compile cache, kept in the temporary
folder (a fresh one per test): NODE_COMPILE_CACHE points it at .cache/copilot-compile-cache,
shared by every run, so a run does not compile the CLI's ~8 MB of JavaScript again (about a
sixth of its CPU).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.coding_agents.codex_cli import Result, npm_cli
from tests.interpreter_path import path_with_interpreter

REPO = Path(__file__).resolve().parents[2]
INSTALLER = REPO / "scripts" / "install_copilot_cli.sh"
CACHE_HOME = REPO / ".cache" / "copilot-cache"
COMPILE_CACHE = REPO / ".cache" / "copilot-compile-cache"
API_KEY = "sk-test-copilot"
MODEL = "gpt-4.1"


def copilot_binary() -> str:
    """The CLI's path; installs it first if needed."""
    return npm_cli(INSTALLER)


class CopilotRun:
    """One project (a git repository), HOME and COPILOT_HOME for a series of CLI runs."""

    def __init__(self, project: Path, home: Path, base_url: str) -> None:
        self.project = project
        self.home = home
        self.base_url = base_url
        project.mkdir(parents=True, exist_ok=True)
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(project)], check=True)

    def env(self, extra: dict[str, str] | None = None, *,
            repo_hooks: bool = True) -> dict[str, str]:
        env = {
            "PATH": path_with_interpreter(),
            "HOME": str(self.home),
            "TMPDIR": str(self.home / "tmp"),
            "COPILOT_HOME": str(self.home / ".copilot"),
            "COPILOT_CACHE_HOME": str(CACHE_HOME),
            "NODE_COMPILE_CACHE": str(COMPILE_CACHE),
            "COPILOT_OFFLINE": "true",
            "COPILOT_AUTO_UPDATE": "false",
            "COPILOT_PROVIDER_BASE_URL": self.base_url,
            "COPILOT_PROVIDER_TYPE": "openai",
            "COPILOT_PROVIDER_API_KEY": API_KEY,
            "COPILOT_MODEL": MODEL,
        }
        if repo_hooks:
            env["GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS"] = "true"
        if "PYTHONPATH" in os.environ:
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        env.update(extra or {})
        return env

    def run(self, prompt: str = "go", *, env: dict[str, str] | None = None,
            repo_hooks: bool = True, timeout: float = 120) -> Result:
        cmd = [copilot_binary(), "-p", prompt, "--allow-all-tools"]
        done = subprocess.run(cmd, cwd=self.project, env=self.env(env, repo_hooks=repo_hooks),
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        return Result(done.returncode, done.stdout, done.stderr)
