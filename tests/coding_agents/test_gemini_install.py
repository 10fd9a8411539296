"""``hookgate gemini install`` / ``uninstall`` / ``--check`` on Gemini CLI's settings.json:
every other setting and hook is kept, installing twice leaves one set, uninstall removes
only hookgate's, and ``--check`` fails where Gemini would not run the hooks."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from hookgate.cli.main import app
from tests.coding_agents.gemini_cli import GeminiRun
from tests.coding_agents.gemini_scene import install

THEIRS = {"type": "command", "name": "lint", "command": "echo theirs >/dev/null",
          "timeout": 5000}
SETTINGS = {"model": {"name": "gemini-2.5-pro"}, "hooks": {
    "BeforeTool": [{"matcher": "write_file", "hooks": [THEIRS]}],
    "AfterAgent": [{"hooks": [THEIRS]}]}}


def test_install_keeps_what_is_there_and_uninstall_removes_only_its_own(
        tmp_path: Path) -> None:
    cli = GeminiRun(tmp_path / "project", tmp_path / "home", "http://127.0.0.1:9")
    cli.settings.parent.mkdir()
    cli.settings.write_text(json.dumps(SETTINGS))
    for _ in range(2):
        install(cli, "http://127.0.0.1:8000/api", wait_s=20)
    settings = json.loads(cli.settings.read_text())
    assert settings["model"] == {"name": "gemini-2.5-pro"}
    hooks = settings["hooks"]
    assert hooks["AfterAgent"] == [{"hooks": [THEIRS]}]
    assert hooks["BeforeTool"][0] == {"matcher": "write_file", "hooks": [THEIRS]}
    assert [len(hooks[e]) for e in ("BeforeTool", "AfterTool", "SessionStart")] == [2, 1, 1]
    ours = hooks["BeforeTool"][1]
    assert ours["matcher"] == ".*" and "matcher" not in hooks["SessionStart"][0]
    [handler] = ours["hooks"]
    assert handler["timeout"] == 31_000  # milliseconds: 20 s + 6 for curl + 5
    assert "http://127.0.0.1:8000/api/gemini/hooks?agent=coder" in handler["command"]
    assert "/api/api/" not in handler["command"]

    done = CliRunner().invoke(app, ["gemini", "uninstall", "--project", str(cli.project)],
                              env={"HOME": str(cli.home)})
    assert done.exit_code == 0, done.output
    assert json.loads(cli.settings.read_text()) == SETTINGS


def test_check_fails_where_gemini_would_not_run_the_hooks(tmp_path: Path) -> None:
    cli = GeminiRun(tmp_path / "project", tmp_path / "home", "http://127.0.0.1:9")

    def check() -> str:
        done = CliRunner().invoke(app, ["gemini", "install", "--agent", "coder", "--check",
                                        "--project", str(cli.project)],
                                  env={"HOME": str(cli.home)})
        assert done.exit_code != 0, done.output
        return done.output

    assert "no hookgate hook" in check()
    install(cli, "http://127.0.0.1:9", wait_s=20)
    user = cli.home / ".gemini" / "settings.json"
    user.write_text(json.dumps({**json.loads(user.read_text()),
                                "hooksConfig": {"disabled": ["hookgate"]}}))
    assert "disables the hooks named 'hookgate'" in check()
    user.write_text(json.dumps({"hooksConfig": {"enabled": False}}))
    assert "turns hooks off" in check()
    user.write_text("{}")
    # Nothing listens on port 9: the hook, run as Gemini runs it, does not reach hookgate.
    assert "does not reach hookgate" in check()


def test_a_user_level_install_keeps_the_users_settings(tmp_path: Path) -> None:
    cli = GeminiRun(tmp_path / "project", tmp_path / "home", "http://127.0.0.1:9")
    user = cli.home / ".gemini" / "settings.json"
    before = json.loads(user.read_text())
    env = {"HOME": str(cli.home), "GEMINI_CLI_HOME": ""}
    done = CliRunner().invoke(app, ["gemini", "install", "--agent", "coder", "--user",
                                    "--url", "http://127.0.0.1:8000"], env=env)
    assert done.exit_code == 0, done.output
    settings = json.loads(user.read_text())
    assert {k: v for k, v in settings.items() if k != "hooks"} == before
    assert sorted(settings["hooks"]) == ["AfterTool", "BeforeAgent", "BeforeTool",
                                         "SessionStart"]
    assert not cli.settings.exists()
    done = CliRunner().invoke(app, ["gemini", "uninstall", "--user"], env=env)
    assert done.exit_code == 0, done.output
    assert json.loads(user.read_text()) == {**before, "hooks": {}}
