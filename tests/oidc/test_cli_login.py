"""`hookgate login` signs in through the provider on loopback (a browser redirect to the CLI's
loopback listener), keeps the session in a file only its user can read, and `hookgate
approvals` then decides with it; `hookgate logout` ends it. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.oidc.provider import authorize, mock_provider
from tests.oidc.world import ALICE_ORG, pending_request, serving
from tests.server.demo_world import auth

pytestmark = pytest.mark.both_databases


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args],
                          capture_output=True, text=True, timeout=120, env=env)


def test_the_cli_signs_in_decides_and_signs_out(database_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "HOOKGATE_TOKEN": ""}
    with mock_provider() as idp, serving(database_url, idp) as (srv, _bank), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("carol-sub", ALICE_ORG)
        request = pending_request(c)
        login = subprocess.Popen(
            [sys.executable, "-m", "hookgate.cli.main", "login", "--url", srv.url,
             "--no-browser", "--timeout", "60"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert login.stdout is not None
            url = ""
            while not url.startswith("http"):
                line = login.stdout.readline()
                assert line, login.stderr.read() if login.stderr else "login ended"
                url = line.strip()
            # The person signs in at the provider; their browser follows the redirect to
            # the CLI's loopback listener.
            back = authorize(url, "carol-sub")
            assert back.startswith("http://127.0.0.1:")
            assert httpx.get(back, timeout=10).status_code == 200
            out, err = login.communicate(timeout=60)
        finally:
            if login.poll() is None:
                login.kill()
        assert login.returncode == 0, err
        assert "Signed in" in out
        path = tmp_path / "config" / "hookgate" / "credentials.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        saved = json.loads(path.read_text())["servers"][srv.url]
        assert saved["org_id"] == "acme" and saved["session"].startswith("hgs_")

        listed = _cli(env, "approvals", "list", "--url", srv.url)
        assert listed.returncode == 0, listed.stderr
        assert request["id"] in listed.stdout
        approved = _cli(env, "approvals", "approve", request["id"], "--url", srv.url)
        assert approved.returncode == 0, approved.stderr
        shown = c.get(f"/api/confirmations/{request['id']}", headers=auth("alice")).json()
        assert shown["status"] == "approved"
        assert shown["decision"]["channel_identity"] == f"oidc:{idp.url}#carol-sub"

        session = saved["session"]
        out = _cli(env, "logout", "--url", srv.url)
        assert out.returncode == 0, out.stderr
        assert srv.url not in json.loads(path.read_text())["servers"]
        # The session ended at the server, not only in the file.
        assert c.get("/api/confirmations",
                     headers={"Authorization": f"Bearer {session}"}).status_code == 401
        after = _cli(env, "approvals", "list", "--url", srv.url)
        assert after.returncode != 0 and "hookgate login" in after.stderr


def test_a_credentials_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "hookgate" / "credentials.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"servers": {"http://127.0.0.1:9": {"session": "hgs_x"}}}))
    path.chmod(0o644)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "HOOKGATE_TOKEN": ""}
    out = _cli(env, "approvals", "list", "--url", "http://127.0.0.1:9")
    assert out.returncode != 0 and "can be read by others" in out.stderr


def test_the_cli_sign_in_refuses_a_redirect_off_loopback(database_url: str) -> None:
    with mock_provider() as idp, serving(database_url, idp) as (srv, _bank):
        got = httpx.post(f"{srv.url}/auth/cli/start", timeout=10,
                         json={"redirect_url": "https://evil.example/callback"})
        assert got.status_code == 400
        # A browser's sign-in state cannot be finished by the CLI (nor the reverse).
        start = httpx.get(f"{srv.url}/auth/login", timeout=10)
        idp.set_user("carol-sub", ALICE_ORG)
        back = authorize(start.headers["location"], "carol-sub")
        from urllib.parse import parse_qs, urlsplit
        query = {k: v[0] for k, v in parse_qs(urlsplit(back).query).items()}
        done = httpx.post(f"{srv.url}/auth/cli/finish", json={**query, "login_secret": "x"},
                          timeout=10)
        assert done.status_code == 401, done.text
        # Nor can a CLI sign-in be finished by another process than the one that started it.
        started = httpx.post(f"{srv.url}/auth/cli/start", timeout=10,
                             json={"redirect_url": "http://127.0.0.1:9/callback"}).json()
        back = authorize(started["authorization_url"], "carol-sub")
        query = {k: v[0] for k, v in parse_qs(urlsplit(back).query).items()}
        done = httpx.post(f"{srv.url}/auth/cli/finish", timeout=10,
                          json={**query, "login_secret": "guessed"})
        assert done.status_code == 401 and "started elsewhere" in done.text
