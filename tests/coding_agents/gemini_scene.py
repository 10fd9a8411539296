"""A hookgate server whose agent ``coder`` is the approval backend of a real Gemini CLI, with
hooks written by ``hookgate gemini install`` (the same agent, rules and fake Slack as the
Codex scene: shell commands that write ``*.log`` files need a person's approval)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from hookgate.cli.main import app
from tests.claude_code.scene import TOKEN, Scene, coder
from tests.coding_agents.codex_cli import Result
from tests.coding_agents.gemini_cli import GeminiRun
from tests.coding_agents.scene import untrusted_shell
from tests.fakes.gemini import FakeGemini, function_responses
from tests.fakes.responses import Script
from tests.fakes.slack import FakeSlack
from tests.live_server import live_server

__all__ = ["TOKEN", "GeminiScene", "gemini_scene", "install", "seen"]


def install(cli: GeminiRun, url: str, *, wait_s: float, agent: str = "coder") -> str:
    """``hookgate gemini install`` for ``cli``'s project."""
    done = CliRunner().invoke(app, ["gemini", "install", "--agent", agent, "--url", url,
                                    "--project", str(cli.project), "--wait", str(wait_s)],
                              env={"HOME": str(cli.home)})
    assert done.exit_code == 0, done.output
    return done.output


def seen(model: FakeGemini) -> list[str]:
    """What the model read of each tool call, in order (the output, or the error)."""
    out = []
    for response in function_responses(model.requests[-1]):
        text = response.get("output", response.get("error"))
        out.append(text if isinstance(text, str) else str(response))
    return out


@dataclass
class GeminiScene(Scene):
    gemini: GeminiRun = None  # type: ignore[assignment]
    model: FakeGemini = None  # type: ignore[assignment]

    def exec(self, token: str = TOKEN, prompt: str = "go") -> Result:
        return self.gemini.run(prompt, env={"HOOKGATE_TOKEN": token})


@contextmanager
def gemini_scene(tmp_path: Path, database_url: str, slack: FakeSlack, script: Script, *,
                 wait_s: float = 15.0, read_only: bool = False,
                 extra_hooks: list[dict[str, Any]] | None = None,
                 provenance: bool = False) -> Iterator[GeminiScene]:
    from hookgate.runtime.deployment import ChannelSpec

    deployment = coder(wait_s, read_only=read_only, extra_hooks=extra_hooks)
    if provenance:
        untrusted_shell(deployment)
    deployment.database_url = database_url
    deployment.channels = [ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())]
    with live_server(deployment) as srv, FakeGemini(script) as model:
        cli = GeminiRun(tmp_path / "project", tmp_path / "home", model.base_url)
        install(cli, srv.url, wait_s=wait_s)
        scene: Any = GeminiScene(srv, slack, None, None, gemini=cli,  # type: ignore[arg-type]
                                 model=model)
        yield scene
