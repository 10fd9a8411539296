"""``hookgate codex install`` / ``uninstall`` against the real Codex CLI's own view of its
hooks (``codex app-server``): what was in hooks.json is kept, hookgate's hooks are trusted
and nobody else's, installing twice leaves one set, and uninstall removes only hookgate's."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from hookgate.cli.main import app
from hookgate.coding_agents.codex_config import listed_hooks
from tests.coding_agents.codex_cli import CodexRun, codex_binary
from tests.coding_agents.scene import install

THEIRS = {"type": "command", "command": "echo theirs >/dev/null", "timeout": 5}


def test_install_keeps_other_hooks_trusts_only_its_own_and_uninstall_removes_only_its_own(
        tmp_path: Path) -> None:
    cli = CodexRun(tmp_path / "project", tmp_path / "home", "http://127.0.0.1:9/v1")
    target = cli.project / ".codex" / "hooks.json"
    target.parent.mkdir()
    target.write_text(json.dumps({"hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [THEIRS]}],
        "Stop": [{"hooks": [THEIRS]}]}}))
    env = {"CODEX_HOME": str(cli.codex_home), "HOME": str(cli.home)}
    for _ in range(2):
        out = install(cli, "http://127.0.0.1:8000", wait_s=20)
    assert "trusted the project" in out and out.count("trusted /") == 4
    hooks = json.loads(target.read_text())["hooks"]
    assert hooks["Stop"] == [{"hooks": [THEIRS]}]
    assert hooks["PreToolUse"][0] == {"matcher": "Bash", "hooks": [THEIRS]}
    assert [len(hooks[e]) for e in ("PreToolUse", "PostToolUse", "SessionStart",
                                    "UserPromptSubmit")] == [2, 1, 1, 1]
    assert hooks["PreToolUse"][1]["hooks"][0]["timeout"] == 31  # 20 + 6 for curl + 5

    listed = listed_hooks(codex_binary(), cli.project, env={**env, "PATH": "/usr/bin:/bin"})
    theirs = [h.trusted for h in listed if h.command == THEIRS["command"]]
    assert theirs == [False, False]  # never trusted on the user's behalf
    ours = [h.trusted for h in listed if h.ours]
    assert ours == [True] * 4

    done = CliRunner().invoke(app, ["codex", "uninstall", "--project", str(cli.project)],
                              env=env)
    assert done.exit_code == 0, done.output
    assert json.loads(target.read_text()) == {"hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [THEIRS]}], "Stop": [{"hooks": [THEIRS]}]}}


def test_check_fails_when_the_hooks_are_not_trusted(tmp_path: Path) -> None:
    cli = CodexRun(tmp_path / "project", tmp_path / "home", "http://127.0.0.1:9/v1")
    env = {"CODEX_HOME": str(cli.codex_home), "HOME": str(cli.home)}
    install(cli, "http://127.0.0.1:8000", wait_s=20)
    target = cli.project / ".codex" / "hooks.json"
    # An edit untrusts a hook in Codex: it would now be skipped without a word.
    target.write_text(target.read_text().replace("--max-time 26", "--max-time 27"))
    done = CliRunner().invoke(app, ["codex", "install", "--agent", "coder", "--check",
                                    "--project", str(cli.project), "--codex", codex_binary()],
                              env=env)
    assert done.exit_code != 0
    assert "skips" in done.output and "silently" in done.output


def test_install_takes_the_servers_api_address_and_refuses_what_is_no_server(
        tmp_path: Path) -> None:
    # The same --url rules as `hookgate claude-code install` (cli/hook_install_options.py).
    cli = CodexRun(tmp_path / "project", tmp_path / "home", "http://127.0.0.1:9/v1")
    install(cli, "http://127.0.0.1:8000/api", wait_s=20)
    commands = [h["command"] for groups in json.loads(
        (cli.project / ".codex" / "hooks.json").read_text())["hooks"].values()
        for group in groups for h in group["hooks"]]
    assert commands and all("http://127.0.0.1:8000/api/codex/hooks" in c for c in commands)
    assert not any("/api/api/" in c for c in commands)
    env = {"CODEX_HOME": str(cli.codex_home), "HOME": str(cli.home)}
    done = CliRunner().invoke(app, ["codex", "install", "--agent", "coder", "--url",
                                    "ftp://example.invalid", "--project", str(cli.project),
                                    "--codex", codex_binary()], env=env)
    assert done.exit_code == 2, done.output
    assert "ftp://example.invalid" in done.output
