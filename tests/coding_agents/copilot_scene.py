"""A hookgate server whose agent ``coder`` is the approval backend of a real GitHub Copilot
CLI, with the hooks file written by ``hookgate copilot install``.

The rules are those of the Codex scene (tests/claude_code/scene.py): shell commands that write
``*.log`` files need a person's approval (a rule on ``Bash``, the name Copilot's ``bash``
gets); approvals go to the fake Slack; attempts are audited.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from hookgate.cli.main import app
from tests.claude_code.scene import TOKEN, Scene
from tests.coding_agents.codex_cli import Result
from tests.coding_agents.copilot_cli import API_KEY, CopilotRun
from tests.coding_agents.scene import served_coder
from tests.fakes.chat_stream import FakeChatStream
from tests.fakes.responses import Script
from tests.fakes.slack import FakeSlack

__all__ = ["TOKEN", "CopilotScene", "copilot_scene", "install"]


def install(cli: CopilotRun, url: str, *, wait_s: float, agent: str = "coder") -> str:
    """``hookgate copilot install`` for ``cli``'s project."""
    done = CliRunner().invoke(app, ["copilot", "install", "--agent", agent, "--url", url,
                                    "--project", str(cli.project), "--wait", str(wait_s)])
    assert done.exit_code == 0, done.output
    return done.output


@dataclass
class CopilotScene(Scene):
    copilot: CopilotRun = None  # type: ignore[assignment]
    model: FakeChatStream = None  # type: ignore[assignment]

    def exec(self, token: str = TOKEN, *, repo_hooks: bool = True) -> Result:
        return self.copilot.run("go", env={"HOOKGATE_TOKEN": token}, repo_hooks=repo_hooks)


@contextmanager
def copilot_scene(tmp_path: Path, database_url: str, slack: FakeSlack, script: Script, *,
                  wait_s: float = 15.0, read_only: bool = False,
                  extra_hooks: list[dict[str, Any]] | None = None) -> Iterator[CopilotScene]:
    with (served_coder(database_url, slack, wait_s=wait_s, read_only=read_only,
                       extra_hooks=extra_hooks) as srv,
          FakeChatStream(script, api_key=API_KEY) as model):
        cli = CopilotRun(tmp_path / "project", tmp_path / "home", model.base_url)
        install(cli, srv.url, wait_s=wait_s)
        yield CopilotScene(srv, slack, None, None,  # type: ignore[arg-type]
                           copilot=cli, model=model)
