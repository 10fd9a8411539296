"""A hookgate configuration with real MCP servers from PyPI behind the gateway, and clients.

``mcp-server-time`` is free to call (and rate limited); ``mcp-server-git`` works on a fresh
repository, and its branch-creating and committing tools need a person's approval. ACME's
``coder`` may use both (a test that uses one may give it only that one: see CODER_SERVERS);
the read-only org Frozen's ``archivist`` may use git only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from hookgate.config import HookgateConfig, load_config
from hookgate.mcp.mapping import OUTCOME_META
from hookgate.runtime.deployment import Deployment, deployment_from_config
from tests.channels.world import eventually
from tests.live_server import LiveServer

TOKENS = {"alice": "tok-alice-mcp", "bob": "tok-bob-mcp", "fred": "tok-fred-mcp",
          "mallory": "tok-mallory-mcp"}

CONFIG = """\
database: {database}
server: {{public_url: {public_url}}}
orgs:
  - {{id: acme, name: ACME}}
  - {{id: frozen, name: Frozen, read_only: true}}
  - {{id: other, name: Other}}
users:
  - {{id: alice, org: acme, token: {alice}, chat: {{slack_user_id: U_ALICE}}}}
  - {{id: bob, org: acme, token: {bob}, chat: {{slack_user_id: U_BOB}}}}
  - {{id: fred, org: frozen, token: {fred}}}
  - {{id: mallory, org: other, token: {mallory}}}
models:
  idle: {{type: scripted, turns: [{{answer: nothing to do}}]}}
mcp_servers:
  - id: time
    command: {python}
    args: [-m, mcp_server_time, --local-timezone, UTC]
  - id: git
    command: {python}
    args: [-m, mcp_server_git, --repository, {repo}]
    timeout_s: 20
    env: {{GIT_TERMINAL_PROMPT: "${{GIT_PROMPT:-0}}"}}
    requires_confirmation:
      - matcher: git_create_branch|git_commit|git_checkout
        reason: branches and commits change the shared repository
      - matcher: git_log
        when: args.max_count > 50
agents:
  - id: coder
    org: acme
    owner: alice
    model: idle
    confirmation_approver_scope: org_members
    mcp: {{servers: [{coder_servers}], resources: true, prompts: true}}
    model_config_json:
      hooks:
        class_hooks:
          - audit_log
          - readonly_guard
          - {{name: connector_rate_limit, params: {{limits: {{mcp__time: 4/minute}}}}}}
  - id: archivist
    org: frozen
    model: idle
    mcp: {{tools: [mcp__git__git_status, mcp__git__git_reset, mcp__git__git_log]}}
    model_config_json: {{hooks: {{class_hooks: [audit_log, readonly_guard]}}}}
"""


@dataclass
class McpWorld:
    root: Path
    repo: Path
    config_path: Path

    def config(self) -> HookgateConfig:
        return load_config(self.config_path)

    def deployment(self) -> Deployment:
        return deployment_from_config(self.config())

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.repo), *args], check=True,
                              capture_output=True, text=True).stdout

    def branches(self) -> list[str]:
        return sorted(self.git("branch", "--format=%(refname:short)").split())


#: The servers ``coder`` reaches. A gateway starts each (a process, ~1 CPU-second) on a
#: session's first listing (the official client lists after a call too) or as a socket or
#: stdio session opens, so a test that uses one server's tools names only that one: the
#: ``coder_servers`` argument, or the ``coder_servers`` mark with the ``world`` fixture.
CODER_SERVERS = ("time", "git")


def make_world(root: Path, database_url: str, public_url: str = "http://127.0.0.1:9", *,
               coder_servers: Sequence[str] = CODER_SERVERS) -> McpWorld:
    repo = root / "repo"
    repo.mkdir()
    world = McpWorld(root, repo, root / "hookgate.yaml")
    world.git("init", "-q", "-b", "main")
    world.git("config", "user.email", "dev@example.com")
    world.git("config", "user.name", "Dev")
    (repo / "README.md").write_text("hello\n")
    world.git("add", "README.md")
    world.git("commit", "-q", "-m", "first")
    world.config_path.write_text(CONFIG.format(
        database=database_url, public_url=public_url, python=sys.executable, repo=repo,
        coder_servers=", ".join(coder_servers), **TOKENS))
    return world


def sqlite_world(root: Path, template: Path, **options: Any) -> McpWorld:
    """A world of a module's own (a module-scoped fixture's): ``make_world`` on a copy of the
    worker's SQLite database migrated to the head (the ``sqlite_template`` fixture), the
    backend ``database_url`` gives a test not marked ``both_databases``."""
    shutil.copyfile(template, root / "hookgate.db")
    return make_world(root, f"sqlite+aiosqlite:///{root / 'hookgate.db'}", **options)


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


@asynccontextmanager
async def http_client(url: str, user: str, **options: Any) -> AsyncIterator[Client]:
    """The official MCP client over streamable HTTP, as ``user``."""
    http = httpx2.AsyncClient(headers=auth(user), timeout=httpx2.Timeout(30.0, read=120.0))
    async with Client(streamable_http_client(url, http_client=http), **options) as client:
        yield client


REPO_ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def relay_client(url: str, user: str, **options: Any) -> AsyncIterator[Client]:
    """The official MCP client through ``hookgate mcp stdio`` relaying to the server at
    ``url``/mcp/<agent>, as ``user`` (the thin client: only the URL and the token)."""
    base, _, agent = url.rpartition("/mcp/")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hookgate.cli.main", "mcp", "stdio", "--agent", agent],
        env={"HOOKGATE_TOKEN": TOKENS[user], "HOOKGATE_URL": base,
             "PYTHONPATH": os.pathsep.join(
                 p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)})
    async with Client(params, **options) as client:
        yield client


def stdio_params(world: McpWorld, agent: str, user: str) -> StdioServerParameters:
    """``hookgate mcp stdio --in-process`` as a subprocess, the way a desktop client starts
    it on a machine trusted with the server's database."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "hookgate.cli.main", "mcp", "stdio", "--agent", agent, "--in-process",
              "--config", str(world.config_path)],
        # The repository's root too: hooks the tests declare live in the ``tests`` package.
        env={"HOOKGATE_TOKEN": TOKENS[user],
             "PYTHONPATH": os.pathsep.join(
                 p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)},
        cwd=str(world.root),
    )


def relay_params(url: str, agent: str, user: str, connection: str = "socket"
                 ) -> StdioServerParameters:
    """``hookgate mcp stdio`` as a desktop client starts it: a relay to the server at ``url``
    with nothing but the URL and the user's token."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "hookgate.cli.main", "mcp", "stdio", "--agent", agent,
              "--connection", connection],
        env={"HOOKGATE_TOKEN": TOKENS[user], "HOOKGATE_URL": url,
             "PYTHONPATH": os.pathsep.join(
                 p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)},
    )


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    """How hookgate decided the call (the gateway's ``_meta`` on every result)."""
    assert result.meta is not None, result
    return dict(result.meta[OUTCOME_META])


def text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def current_time(result: types.CallToolResult) -> dict[str, Any]:
    return dict(json.loads(text(result)))


async def pending_requests(api: httpx.AsyncClient, user: str = "alice") -> list[dict[str, Any]]:
    r = await api.get("/api/confirmations", params={"status": "pending"}, headers=auth(user))
    assert r.status_code == 200, r.text
    return list(r.json())


async def one_pending(api: httpx.AsyncClient) -> dict[str, Any]:
    found = await eventually(lambda: pending_requests(api), "a pending request in the inbox")
    assert len(found) == 1, found
    return dict(found[0])


async def decide(api: httpx.AsyncClient, request_id: str, decision: str,
                 user: str = "bob") -> dict[str, Any]:
    r = await api.post(f"/api/confirmations/{request_id}/respond",
                       json={"decision": decision, "reason": f"{decision} by test"},
                       headers=auth(user))
    assert r.status_code == 200, r.text
    return dict(r.json())


async def audit_rows(api: httpx.AsyncClient, user: str = "alice", **filters: str
                     ) -> list[dict[str, Any]]:
    r = await api.get("/api/audit", params={"limit": 500, **filters}, headers=auth(user))
    assert r.status_code == 200, r.text
    return list(reversed(r.json()["items"]))


def api_client(server: LiveServer) -> httpx.AsyncClient:
    """A client of ``server``'s HTTP API (the inbox's, for deciding and reading requests)."""
    return httpx.AsyncClient(base_url=server.url, timeout=30)
