"""``hookgate claude-code install``: the settings block it writes or prints."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from typer.testing import CliRunner

from hookgate.cli.main import app


def test_install_merges_into_existing_settings_and_replaces_its_own_handlers(
        tmp_path: Path) -> None:
    (tmp_path / "hookgate.yaml").write_text(textwrap.dedent("""
        server: {public_url: "https://gate.example"}
        models: {m: {type: scripted, turns: [{answer: hi}]}}
        agents:
          - id: coder
            model: m
            model_config_json: {claude_code: {wait_s: 45}}
    """))
    settings = tmp_path / "p" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    mine = {"matcher": "Bash", "hooks": [{"type": "command", "command": "./mine.sh"}]}
    settings.write_text(json.dumps({"model": "x", "hooks": {"PreToolUse": [mine]}}))
    args = ["claude-code", "install", "--agent", "coder", "--config",
            str(tmp_path / "hookgate.yaml"), "--project", str(tmp_path / "p")]
    for _ in range(2):  # installing twice leaves one set of handlers
        done = CliRunner().invoke(app, args)
        assert done.exit_code == 0, done.output
    data = json.loads(settings.read_text())
    assert data["model"] == "x"
    assert data["hooks"]["PreToolUse"][0] == mine and len(data["hooks"]["PreToolUse"]) == 2
    ours = data["hooks"]["PreToolUse"][1]["hooks"][0]
    assert ours["url"] == "https://gate.example/api/claude-code/hooks?agent=coder"
    assert ours["headers"]["Authorization"] == "Bearer $HOOKGATE_TOKEN"
    assert "HOOKGATE_TOKEN" in ours["allowedEnvVars"] and ours["onFailure"] == "block"
    assert ours["timeout"] > 45  # longer than hookgate's own wait for a person
    assert set(data["hooks"]) == {"PreToolUse", "PermissionRequest", "PostToolUse",
                                  "PostToolUseFailure", "SessionStart", "UserPromptSubmit",
                                  "Stop"}


def test_install_print_shows_the_block_and_writes_nothing(tmp_path: Path) -> None:
    done = CliRunner().invoke(app, ["claude-code", "install", "--agent", "a b", "--print",
                                    "--token-env", "MY_TOKEN", "--project", str(tmp_path)])
    assert done.exit_code == 0, done.output
    block = json.loads(done.output)
    handler = block["hooks"]["Stop"][0]["hooks"][0]
    assert handler["url"].endswith("?agent=a%20b")
    assert handler["headers"]["Authorization"] == "Bearer $MY_TOKEN"
    assert not (tmp_path / ".claude").exists()
