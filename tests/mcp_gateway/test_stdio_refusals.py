"""``hookgate mcp stdio`` that cannot serve says why in one line on stderr and exits non-zero
(an MCP client shows that line to its user): no token, a token nobody has, no secrets key
with channels configured, a database it cannot use, an unknown agent or one without ``mcp:``
access, a configuration with errors. Each runs the real command as a client starts it."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from hookgate.runtime.channel_records import SECRETS_KEY_ENV, SecretsKey
from tests.adversarial_tally import TALLY
from tests.mcp_gateway.world import REPO_ROOT, TOKENS, McpWorld

CHANNELS = """\
channels:
  - id: ops-slack
    type: slack
    org: acme
    config: {bot_token: xoxb-test, signing_secret: shh, channel: C0123456789}
"""


@dataclass(frozen=True)
class Exit:
    code: int
    stderr: str

    @property
    def lines(self) -> list[str]:
        return self.stderr.strip().splitlines()


def stdio(world: McpWorld, agent: str = "coder", *, config: Path | None = None,
          **env: str) -> Exit:
    """``hookgate mcp stdio`` with only ``env`` among hookgate's variables, stdin closed."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HOOKGATE_")}
    environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    environ.update(env)
    done = subprocess.run(
        [sys.executable, "-m", "hookgate.cli.main", "mcp", "stdio", "--agent", agent,
         "--in-process",
         "--config", str(config or world.config_path)],
        env=environ, cwd=world.root, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL)
    return Exit(done.returncode, done.stderr)


def assert_one_line(refused: Exit, *said: str) -> str:
    assert refused.code != 0, refused
    assert "Traceback" not in refused.stderr, refused.stderr
    assert len(refused.lines) == 1, refused.stderr
    line = refused.lines[0]
    for words in said:
        assert words in line, line
    return line


def variant(world: McpWorld, name: str, text: str) -> Path:
    path = world.root / name
    path.write_text(text)
    return path


def test_without_a_token_it_says_which_variable_to_set(world: McpWorld) -> None:
    assert_one_line(stdio(world), "set HOOKGATE_TOKEN")


@pytest.mark.both_databases
def test_a_token_nobody_has_is_refused_in_one_line(world: McpWorld) -> None:
    assert_one_line(stdio(world, HOOKGATE_TOKEN="tok-alice-mcp\u2010"),
                    "not a hookgate user's token")


@pytest.mark.both_databases
def test_with_channels_and_no_secrets_key_it_says_to_set_the_servers_key(
        world: McpWorld) -> None:
    config = variant(world, "channels.yaml", world.config_path.read_text() + CHANNELS)
    line = assert_one_line(stdio(world, config=config, HOOKGATE_TOKEN=TOKENS["alice"]),
                           SECRETS_KEY_ENV, "is not set", "hookgate secrets generate-key")
    assert "SecretsKeyError" not in line


def test_a_secrets_key_that_is_no_key_is_refused_without_echoing_it(world: McpWorld) -> None:
    config = variant(world, "channels.yaml", world.config_path.read_text() + CHANNELS)
    line = assert_one_line(
        stdio(world, config=config, HOOKGATE_TOKEN=TOKENS["alice"],
              HOOKGATE_SECRETS_KEY="not-a-fernet-key-1234"),
        SECRETS_KEY_ENV, "not a Fernet key")
    assert "not-a-fernet-key-1234" not in line


@pytest.mark.both_databases
def test_with_channels_and_the_key_it_gets_as_far_as_the_agent(world: McpWorld) -> None:
    # The key is accepted: what stops it now is the agent, proving the key path passed.
    config = variant(world, "channels.yaml", world.config_path.read_text() + CHANNELS)
    assert_one_line(stdio(world, "ghost", config=config, HOOKGATE_TOKEN=TOKENS["alice"],
                          HOOKGATE_SECRETS_KEY=SecretsKey.generate()),
                    "agent 'ghost'")


def test_an_unreachable_database_is_named_in_one_line(world: McpWorld) -> None:
    text = world.config_path.read_text().splitlines(keepends=True)
    text[0] = "database: postgresql://postgres@127.0.0.1:1/nowhere\n"
    config = variant(world, "unreachable.yaml", "".join(text))
    assert_one_line(stdio(world, config=config, HOOKGATE_TOKEN=TOKENS["alice"]),
                    "database", "cannot reach the database")


def test_a_sqlite_file_in_a_missing_folder_is_named_in_one_line(world: McpWorld) -> None:
    text = world.config_path.read_text().splitlines(keepends=True)
    text[0] = f"database: sqlite+aiosqlite:///{world.root / 'gone' / 'h.db'}\n"
    config = variant(world, "nofolder.yaml", "".join(text))
    assert_one_line(stdio(world, config=config, HOOKGATE_TOKEN=TOKENS["alice"]),
                    "database", "does not exist")


@pytest.mark.both_databases
async def test_a_database_migrated_by_a_newer_hookgate_is_refused(
        world: McpWorld, database_url: str) -> None:
    from sqlalchemy import text

    from hookgate.storage.database import Database

    db = Database(database_url)
    try:
        await db.upgrade()
        async with db.engine.begin() as conn:
            await conn.execute(text("UPDATE alembic_version SET version_num = 'f00dfeedbeef'"))
    finally:
        await db.dispose()
    assert_one_line(stdio(world, HOOKGATE_TOKEN=TOKENS["alice"]),
                    "database", "f00dfeedbeef", "does not know")


@pytest.mark.both_databases
@pytest.mark.parametrize("agent", ["ghost", "c\u043eder", "coder\nadmin", "archivist"])
def test_an_agent_the_user_may_not_reach_is_refused_in_one_line(
        world: McpWorld, agent: str) -> None:
    # An unknown id, a Cyrillic look-alike, an injected line, another org's agent: the same
    # single line, naming nothing of the agent beyond what the user typed.
    refused = stdio(world, agent, HOOKGATE_TOKEN=TOKENS["alice"])
    line = assert_one_line(refused, "is not in org 'acme' or declares no 'mcp:' access")
    TALLY.record(f"stdio serves agent {agent!r} to alice", refused.code == 0)
    assert "frozen" not in line


@pytest.mark.both_databases
def test_an_agent_without_mcp_access_is_refused(world: McpWorld) -> None:
    text = world.config_path.read_text() + (
        "  - {id: plain, org: acme, model: idle}\n")
    config = variant(world, "plain.yaml", text)
    refused = stdio(world, "plain", config=config, HOOKGATE_TOKEN=TOKENS["alice"])
    assert_one_line(refused, "agent 'plain'", "no 'mcp:' access")
    TALLY.record("stdio serves an agent without mcp: access", refused.code == 0)


def test_a_configuration_with_several_errors_is_one_line_naming_each(world: McpWorld) -> None:
    text = (world.config_path.read_text().replace("model: idle", "model: nosuch")
            .replace("servers: [time, git]", "servers: [time, nope]"))
    config = variant(world, "broken.yaml", text)
    assert_one_line(stdio(world, config=config, HOOKGATE_TOKEN=TOKENS["alice"]),
                    "unknown model 'nosuch'", "unknown MCP server 'nope'")


def test_a_missing_configuration_file_is_one_line(world: McpWorld) -> None:
    assert_one_line(stdio(world, config=world.root / "absent.yaml",
                          HOOKGATE_TOKEN=TOKENS["alice"]), "absent.yaml")
