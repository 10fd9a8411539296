"""Drive the real Gemini CLI (pinned in scripts/install_gemini_cli.sh) headless and offline.

``gemini_binary()`` installs it into .cache/gemini-cli through npm when it is missing (as
.ci/run does); ``GeminiRun`` runs ``gemini -p`` in a project directory with an isolated HOME
whose settings pick the API-key auth, turn off telemetry and updates, and whose only model
is a loopback fake of the Gemini API (GOOGLE_GEMINI_BASE_URL).
"""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

from tests.coding_agents.codex_cli import Result, npm_cli
from tests.interpreter_path import path_with_interpreter

REPO = Path(__file__).resolve().parents[2]
INSTALLER = REPO / "scripts" / "install_gemini_cli.sh"
API_KEY = "gemini-test-key"

#: The user settings: API-key auth (else exit 41), nothing that reaches out.
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
}


@functools.cache
def gemini_binary() -> str:
    """The CLI's path; installs it first if needed. Skips only when npm itself is missing."""
    return npm_cli(INSTALLER)


class GeminiRun:
    """One project directory and HOME for a series of CLI runs."""

    def __init__(self, project: Path, home: Path, base_url: str) -> None:
        self.project = project
        self.home = home
        self.base_url = base_url
        project.mkdir(parents=True, exist_ok=True)
        (home / ".gemini").mkdir(parents=True, exist_ok=True)
        (home / "tmp").mkdir(exist_ok=True)
        (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS))

    @property
    def settings(self) -> Path:
        return self.project / ".gemini" / "settings.json"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            "PATH": path_with_interpreter(),
            "HOME": str(self.home),
            "TMPDIR": str(self.home / "tmp"),
            "GOOGLE_GEMINI_BASE_URL": self.base_url,
            "GEMINI_API_KEY": API_KEY,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "GEMINI_CLI_NO_RELAUNCH": "true",
        }
        env.update(extra or {})
        return env

    def run(self, prompt: str = "go", *, env: dict[str, str] | None = None,
            timeout: float = 120) -> Result:
        cmd = [gemini_binary(), "-m", "gemini-2.5-flash", "--yolo", "-p", prompt]
        done = subprocess.run(cmd, cwd=self.project, env=self.env(env), capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        return Result(done.returncode, done.stdout, done.stderr)
