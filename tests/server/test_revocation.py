"""Revocation with a real `hookgate serve` and the real CLI: a user removed from the file
cannot sign in, start runs or decide after a restart; a token the file no longer gives, a
revoked token (CLI or admin API) and an expired token no longer sign in, and a restart
does not bring any of them back."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hookgate.approvals.eligibility import Approver
from hookgate.approvals.errors import NotEligible
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.storage.database import Database
from tests.loopback_http import HTTP
from tests.server.test_restart import ROOT, Serve, wait_for

pytestmark = pytest.mark.both_databases

TOKENS = {u: f"revocation-token-{u}" for u in
          ("alice", "bob", "carol", "dave", "erin", "frank", "gina", "mallory")}

HEAD = """
database: {database}
orgs: [{{id: acme, name: ACME}}, {{id: other, name: Other}}]
tools: [tests.restart_tools:oa__purchase_pay]
models:
  script:
    type: scripted
    turns:
      - tool_calls: [{{name: oa__purchase_pay, args: {{amount: 60000, vendor: ACME}}}}]
      - answer: paid
agents:
  - id: buyer
    org: acme
    owner: alice
    model: script
    tools: [oa__purchase_pay]
    confirmation_mode: inline_only
    confirmation_approver_scope: org_members
users:
"""


def user(uid: str, org: str = "acme", *, token: bool = True, admin: bool = False,
         expires: str | None = None) -> str:
    parts = [f"id: {uid}", f"org: {org}"]
    if token:
        parts.append(f"token: {TOKENS[uid]}")
    if admin:
        parts.append("admin: true")
    if expires:
        parts.append(f"token_expires_at: '{expires}'")
    return "  - {" + ", ".join(parts) + "}\n"


def h(token_of: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS.get(token_of, token_of)}"}


def status(url: str, who: str, path: str = "/api/me") -> int:
    return HTTP.get(url + path, headers=h(who), timeout=10).status_code


def cli(config: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ,
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args, "--config",
                           str(config)], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_the_file_is_the_source_of_truth_and_revocation_holds(
        tmp_path: Path, database_url: str) -> None:
    config = tmp_path / "hookgate.yaml"
    everyone = (user("alice", admin=True) + user("bob") + user("carol")
                + user("dave", admin=True) + user("erin") + user("mallory", "other", admin=True)
                + user("frank", expires="2020-01-01T00:00:00Z")
                + user("gina", expires="2099-01-01T00:00:00Z"))
    config.write_text(HEAD.format(database=database_url) + everyone)
    serve = Serve(config, tmp_path / "ledger.txt")
    try:
        serve.start()
        for who in ("alice", "bob", "carol", "gina"):
            assert status(serve.url, who) == 200, who
        assert status(serve.url, "frank") == 401  # expired in the file
        run = HTTP.post(serve.url + "/api/runs", json={"agent_id": "buyer",
                                                       "message": "pay"},
                        headers=h("carol"), timeout=10).json()
        [request] = wait_for(lambda: HTTP.get(
            serve.url + "/api/confirmations?status=pending", headers=h("alice"),
            timeout=10).json(), "the pending request")

        # bob leaves the file; carol stays but without a token.
        config.write_text(HEAD.format(database=database_url) + user("alice", admin=True)
                          + user("carol", token=False) + user("dave", admin=True)
                          + user("erin") + user("mallory", "other", admin=True))
        serve.kill()
        serve.start()
        assert status(serve.url, "bob") == 401
        assert status(serve.url, "carol") == 401
        r = HTTP.post(serve.url + "/api/runs", json={"agent_id": "buyer", "message": "x"},
                      headers=h("bob"), timeout=10)
        assert r.status_code == 401
        r = HTTP.post(f"{serve.url}/api/confirmations/{request['id']}/respond",
                      json={"decision": "approve"}, headers=h("bob"), timeout=10)
        assert r.status_code == 401
        # Nor can bob decide by any other way in (a chat click ends in the same decide).
        with pytest.raises(NotEligible, match="disabled"):
            asyncio.run(decide_offline(database_url, request["id"], "bob"))
        listing = {u["id"]: u for u in HTTP.get(serve.url + "/api/users", headers=h("alice"),
                                                timeout=10).json()}
        assert listing["bob"]["disabled"] is True and listing["bob"]["has_token"] is False
        assert listing["carol"]["has_token"] is False and "token" not in listing["alice"]

        # The admin API: not for non-admins, not across orgs; an admin revokes for good.
        assert HTTP.post(serve.url + "/api/users/alice/revoke", headers=h("erin"),
                         timeout=10).status_code == 403
        assert HTTP.post(serve.url + "/api/users/erin/revoke", headers=h("mallory"),
                         timeout=10).status_code == 404
        r = HTTP.post(serve.url + "/api/users/erin/revoke", headers=h("dave"), timeout=10)
        assert r.status_code == 200 and r.json() == {"user_id": "erin", "revoked": True}
        assert status(serve.url, "erin") == 401

        # The CLI revokes on the running server's database, effective at once.
        done = cli(config, tmp_path, "users", "revoke", "alice")
        assert done.returncode == 0, done.stderr
        assert "revoked" in done.stdout
        # The server remembers a valid token for TTL_S (2 s): the revocation holds after it.
        wait_for(lambda: status(serve.url, "alice") == 401, "alice's token to stop", 10)
        missing = cli(config, tmp_path, "users", "revoke", "nobody")
        assert missing.returncode != 0 and "no user 'nobody'" in missing.stderr + missing.stdout

        # A token that expires: works, then stops.
        # 5 s: the length is not what is checked, only that it is longer than this CLI
        # call's exit and one request (the wait below is for the expiry plus TTL_S).
        made = cli(config, tmp_path, "users", "create", "hank", "--org", "acme",
                   "--expires-in", "5s")
        assert made.returncode == 0, made.stderr
        hank = made.stdout.strip().splitlines()[-1]
        assert status(serve.url, hank) == 200
        wait_for(lambda: status(serve.url, hank) == 401, "hank's token to expire", 40)

        # The file still gives alice's and erin's revoked tokens: a restart does not
        # reinstate them, and bob stays out.
        serve.kill()
        serve.start()
        for who in ("alice", "erin", "bob", "carol"):
            assert status(serve.url, who) == 401, who
        assert status(serve.url, "dave") == 200
        assert run["run_id"]
    finally:
        serve.stop()


async def decide_offline(database_url: str, request_id: str, who: str) -> Any:
    db = Database(database_url)
    try:
        return await PersistentApprovals(db).decide(request_id, "approve",
                                                    Approver(who, "acme"))
    finally:
        await db.dispose()


def test_users_create_refuses_a_bad_expiry(tmp_path: Path, database_url: str) -> None:
    config = tmp_path / "hookgate.yaml"
    config.write_text(HEAD.format(database=database_url) + user("alice"))
    done = cli(config, tmp_path, "users", "create", "x", "--org", "acme",
               "--expires-in", "soon")
    assert done.returncode != 0
    assert "--expires-in" in done.stdout + done.stderr
