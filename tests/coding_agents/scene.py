"""A hookgate server whose agent ``coder`` is the approval backend of a real Codex CLI, with
hooks written and trusted by ``hookgate codex install``.

Shell commands that write ``*.log`` files need a person's approval (a rule on ``Bash``, the
name every agent's shell call gets); approvals go to the fake Slack; attempts are audited.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from hookgate.cli.main import app
from hookgate.runtime.deployment import Deployment
from tests.claude_code.scene import TOKEN, Scene, coder
from tests.coding_agents.codex_cli import CodexRun, Result, codex_binary
from tests.fakes.responses import FakeResponses, Script
from tests.fakes.slack import FakeSlack
from tests.live_server import LiveServer, live_server

__all__ = ["TOKEN", "CodexScene", "codex_scene", "install", "untrusted_shell"]


def untrusted_shell(deployment: Deployment) -> Deployment:
    """``coder`` for provenance: the shell writes, its output is untrusted content, and
    ``untrusted_target`` asks a person about a shell command holding a value (an address)
    that came only from a shell output, not from the user's prompt."""
    config = deployment.agents["coder"].model_config_json
    config["claude_code"]["rules"] = [{"matcher": "Bash", "writes": True}]
    config["hooks"]["class_hooks"] = [*config["hooks"]["class_hooks"],
                                      {"name": "untrusted_target",
                                       "params": {"matcher": "Bash"}}]
    config["hooks"]["untrusted_output"] = ["Bash"]
    return deployment


def install(cli: CodexRun, url: str, *, wait_s: float, agent: str = "coder") -> str:
    """``hookgate codex install`` for ``cli``'s project (hooks trusted in its CODEX_HOME)."""
    done = CliRunner().invoke(app, ["codex", "install", "--agent", agent, "--url", url,
                                    "--project", str(cli.project), "--codex", codex_binary(),
                                    "--wait", str(wait_s)],
                              env={"CODEX_HOME": str(cli.codex_home), "HOME": str(cli.home)})
    assert done.exit_code == 0, done.output
    return done.output


@dataclass
class CodexScene(Scene):
    codex: CodexRun = None  # type: ignore[assignment]
    model: FakeResponses = None  # type: ignore[assignment]

    def exec(self, token: str = TOKEN, prompt: str = "go") -> Result:
        return self.codex.run(prompt, env={"HOOKGATE_TOKEN": token})


@contextmanager
def served_coder(database_url: str, slack: FakeSlack, *, wait_s: float, read_only: bool,
                 extra_hooks: list[dict[str, Any]] | None,
                 provenance: bool = False) -> Iterator[LiveServer]:
    """hookgate serving the agent ``coder`` of every coding agent's scene (``provenance``:
    as `untrusted_shell` makes it)."""
    from hookgate.runtime.deployment import ChannelSpec

    deployment = coder(wait_s, read_only=read_only, extra_hooks=extra_hooks)
    if provenance:
        untrusted_shell(deployment)
    deployment.database_url = database_url
    deployment.channels = [ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())]
    with live_server(deployment) as srv:
        yield srv


@contextmanager
def codex_scene(tmp_path: Path, database_url: str, slack: FakeSlack, script: Script, *,
                wait_s: float = 15.0, read_only: bool = False,
                extra_hooks: list[dict[str, Any]] | None = None,
                provenance: bool = False) -> Iterator[CodexScene]:
    with served_coder(database_url, slack, wait_s=wait_s, read_only=read_only,
                      extra_hooks=extra_hooks, provenance=provenance) as srv, \
            FakeResponses(script) as model:
        cli = CodexRun(tmp_path / "project", tmp_path / "home", model.base_url)
        install(cli, srv.url, wait_s=wait_s)
        scene: Any = CodexScene(srv, slack, None, None, codex=cli,  # type: ignore[arg-type]
                                model=model)
        yield scene
