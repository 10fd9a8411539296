"""`hookgate db upgrade` and `hookgate users create` as real subprocesses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.live_server import live_server
from tests.server.demo_world import world

HOOKGATE = [sys.executable, "-m", "hookgate.cli.main"]


def hookgate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOOKGATE, *args], capture_output=True, text=True, timeout=120)


def test_created_user_signs_in_with_the_token_printed_once(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'hookgate.db'}"
    up = hookgate("db", "upgrade", "--database", url)
    assert up.returncode == 0, up.stderr
    assert "up to date" in up.stdout

    missing_org = hookgate("users", "create", "carol", "--org", "acme", "--database", url)
    assert missing_org.returncode == 1
    assert "org 'acme' does not exist" in missing_org.stderr

    deployment, _ = world(url)
    with live_server(deployment) as srv:  # declares org acme in the database
        created = hookgate("users", "create", "carol", "--org", "acme", "--database", url)
        assert created.returncode == 0, created.stderr
        token = created.stdout.strip().splitlines()[-1]
        me = httpx.get(f"{srv.url}/api/me", headers={"Authorization": f"Bearer {token}"})
        assert me.status_code == 200
        assert me.json()["user_id"] == "carol" and me.json()["org_id"] == "acme"

    again = hookgate("users", "create", "carol", "--org", "acme", "--database", url)
    assert again.returncode == 1 and "already exists" in again.stderr
    assert token not in (tmp_path / "hookgate.db").read_bytes().decode("latin-1")


def test_db_upgrade_reports_an_unusable_database(tmp_path: Path) -> None:
    bad = hookgate("db", "upgrade", "--database",
                   f"sqlite+aiosqlite:///{tmp_path}/no/such/dir/x.db")
    assert bad.returncode == 1
    assert "migrating" in bad.stderr and "failed" in bad.stderr


def test_serve_refuses_channels_without_a_secrets_key(tmp_path: Path) -> None:
    config = tmp_path / "hookgate.yaml"
    config.write_text(f"""
database: sqlite+aiosqlite:///{tmp_path / 'hookgate.db'}
orgs: [{{id: acme}}]
channels:
  - {{id: ops, type: slack, org: acme,
     config: {{bot_token: xoxb-1, channel: C1, signing_secret: s3cret}}}}
""")
    import os

    env = {k: v for k, v in os.environ.items() if k != "HOOKGATE_SECRETS_KEY"}
    served = subprocess.run([*HOOKGATE, "serve", "--config", str(config), "--port", "1"],
                            capture_output=True, text=True, timeout=60, env=env)
    assert served.returncode == 2
    assert "HOOKGATE_SECRETS_KEY is not set" in served.stderr
    assert "Traceback" not in served.stderr
