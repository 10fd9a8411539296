"""What starting hookgate loads: `import hookgate` and the CLI (every `--help`) leave the
heavy dependencies for the code that uses them (bench/throughput.py times them; this test
keeps an eager import from creeping back in)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("openai", "sqlalchemy", "fastapi", "uvicorn", "alembic", "httpx", "procrastinate",
         "hookgate.tools", "hookgate.storage", "hookgate.runtime",
         "hookgate.server")


def _loaded(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    return set(json.loads(out.splitlines()[-1]))


@pytest.mark.parametrize("code", [
    "import hookgate",
    # What `hookgate --help` runs before it prints: every command group registered.
    "import hookgate.cli.main",
], ids=["import-hookgate", "cli"])
def test_starting_loads_none_of_the_heavy_dependencies(code: str) -> None:
    loaded = _loaded(code)
    assert not sorted(m for m in loaded if any(m == h or m.startswith(h + ".")
                                               for h in HEAVY))


#: What reading a configuration needs none of: the database layer and its drivers, the HTTP
#: server and clients, and each chat platform's channel (its client libraries and crypto).
#: Every CLI command and every `hookgate serve` imports hookgate.config before anything else.
PLATFORMS = tuple(f"hookgate.channels.{platform}.channel" for platform in (
    "feishu", "slack", "wecom", "telegram", "teams", "discord", "mail", "ntfy"))
CONFIG_HEAVY = ("sqlalchemy", "fastapi", "starlette", "uvicorn", "alembic", "httpx",
                "procrastinate", "openai", "cryptography", "jsonschema",
                "hookgate.storage", "hookgate.runtime", "hookgate.server", "hookgate.runs",
                "hookgate.approvals.records", "hookgate.channels.delivery", *PLATFORMS)
#: What the server needs only for some configurations or on first use: schemas from outside
#: (MCP servers, outside agents), channel secrets, migrations, a chat platform.
SERVE_LATER = ("jsonschema", "cryptography", "alembic", "mako", "openai", *PLATFORMS)
#: A configuration with a channel of two types: loading it checks each one's settings.
WITH_CHANNELS = '''
import hookgate.config
hookgate.config.parse_config("""
orgs: [{id: acme, name: ACME}]
channels:
  - {id: s, type: slack, org: acme,
     config: {bot_token: xoxb-1, channel: C1, signing_secret: s}}
  - {id: n, type: ntfy, org: acme, config: {topics: [approvals], callback_url: "https://h.example/cb",
     link_secret: 0123456789abcdef0123456789abcdef}}
""", source="hookgate.yaml")
'''


def _heavy(loaded: set[str], heavy: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in heavy))


@pytest.mark.parametrize("code", ["import hookgate.config", WITH_CHANNELS],
                         ids=["import-config", "parse-channels"])
def test_reading_a_configuration_loads_none_of_the_heavy_dependencies(code: str) -> None:
    # Only the channel types' settings models load, not the channels that talk to a platform.
    assert _heavy(_loaded(code), CONFIG_HEAVY) == []


def test_the_server_application_leaves_what_few_configurations_use_for_later() -> None:
    assert _heavy(_loaded("import hookgate.app"), SERVE_LATER) == []


def test_help_prints_every_command_group() -> None:
    out = subprocess.run([sys.executable, "-m", "hookgate.cli.main", "--help"], check=True,
                         capture_output=True, text=True, timeout=60).stdout
    assert "approvals" in out and "serve" in out


def test_the_relay_leaves_the_mcp_sdk_for_its_http_path() -> None:
    # `hookgate mcp stdio` (the relay) over the server's socket passes bytes: the SDK
    # (~0.9 CPU-s of imports) loads only when a message goes over HTTP (decision record 0033).
    loaded = _loaded("import hookgate.cli.mcp_cmd, hookgate.mcp.relay")
    assert "hookgate.mcp.relay" in loaded
    assert _heavy(loaded, ("mcp", "mcp_types")) == []
