"""The MCP gateway's OAuth audience comes from the configuration, never from the request: a
file with ``mcp_oauth`` and neither ``public_url`` nor an ``audience`` is refused by
``hookgate check`` and ``hookgate serve`` with one line; a token issued for the resource a
forged ``Host`` header names is refused; and the relay's socket takes exactly the tokens
HTTP takes (the same verification), tested with real signed tokens."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import httpx
import pytest

from hookgate.mcp.oauth import NoAudience, OAuthResource
from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.test_oauth import ISSUER, Issuer
from tests.mcp_gateway.world import make_world

PUBLIC = "https://gate.example"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"}}}
ACCEPT = {"accept": "application/json, text/event-stream"}


def _oauth(issuer: Issuer, server: str, audience: str | None = None) -> str:
    extra = f", audience: {audience}" if audience else ""
    return ("server:\n  " + server + "\n  mcp_oauth: {issuer: " + ISSUER + ", jwks_url: "
            + issuer.server.url + "/jwks.json, scopes: [mcp:tools]" + extra + "}")


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    found = Issuer()
    found.server.start()
    try:
        yield found
    finally:
        found.server.stop()


def _world_text(root: Path, issuer: Issuer, server: str, audience: str | None = None
                ) -> tuple[Path, str]:
    # No tool is called: an opened socket starts one downstream server, not two.
    world = make_world(root, f"sqlite+aiosqlite:///{root / 'hookgate.db'}",
                       coder_servers=["git"])
    text = world.config_path.read_text().replace(
        "server: {public_url: http://127.0.0.1:9}", _oauth(issuer, server, audience))
    assert "mcp_oauth" in text
    world.config_path.write_text(text)
    return world.config_path, text


@pytest.mark.parametrize("command", ["check", "serve"])
def test_mcp_oauth_without_a_configured_audience_refuses_to_start(
        tmp_path: Path, issuer: Issuer, command: str) -> None:
    path, _ = _world_text(tmp_path, issuer, "access_recheck_s: 2")
    args = [sys.executable, "-m", "hookgate.cli.main", command, "--config", str(path)]
    if command == "serve":
        args += ["--port", "9"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    said = (done.stdout + done.stderr).strip()
    assert done.returncode != 0, said
    assert "mcp_oauth needs public_url (or mcp_oauth.audience)" in said, said
    assert "Traceback" not in said


def test_a_deployment_without_an_audience_builds_no_resource(issuer: Issuer) -> None:
    from hookgate.config.mcp_servers import McpOAuthSpec

    spec = McpOAuthSpec(issuer=ISSUER, jwks_url=issuer.server.url + "/jwks.json")
    with pytest.raises(NoAudience, match="never from the request's Host header"):
        OAuthResource(spec, None)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, issuer: Issuer
            ) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("audience")
    path, _ = _world_text(root, issuer, f"public_url: {PUBLIC}")
    from hookgate.config import load_config
    from hookgate.runtime.deployment import deployment_from_config

    deployment = deployment_from_config(load_config(path, env={}))
    with live_server(deployment, websockets=True) as srv:
        yield srv


def _post(server: LiveServer, token: str, host: str | None = None) -> httpx.Response:
    headers = {**ACCEPT, "Authorization": f"Bearer {token}"}
    if host is not None:
        headers["host"] = host
    return httpx.post(f"{server.url}/mcp/coder", json=INITIALIZE, headers=headers)


async def _socket(server: LiveServer, token: str, host: str | None = None) -> int | str:
    """The socket's handshake status (refused), or the initialize answer's keys."""
    headers = {"authorization": f"Bearer {token}"}
    if host is not None:
        headers["host"] = host
    async with aiohttp.ClientSession() as http:
        try:
            ws = await http.ws_connect(
                f"ws://127.0.0.1:{server.url.rsplit(':', 1)[1]}/mcp/coder", headers=headers)
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status
        await ws.send_str(json.dumps(INITIALIZE))
        frame = await ws.receive(timeout=20)
        await ws.close()
        return ",".join(sorted(json.loads(frame.data)))


async def test_a_token_for_the_host_a_request_names_is_refused_on_http_and_socket(
        gateway: LiveServer, issuer: Issuer) -> None:
    evil = "evil.example"
    forged = issuer.token(f"http://{evil}/mcp/coder", "mcp:tools")
    assert _post(gateway, forged, host=evil).status_code == 401
    assert await _socket(gateway, forged, host=evil) == 401
    # Where the server really is on loopback is not its configured URL either.
    loopback = issuer.token(f"{gateway.url}/mcp/coder", "mcp:tools")
    assert _post(gateway, loopback).status_code == 401
    assert await _socket(gateway, loopback) == 401


async def test_the_socket_takes_exactly_the_tokens_http_takes(
        gateway: LiveServer, issuer: Issuer) -> None:
    good = issuer.token(f"{PUBLIC}/mcp/coder", "mcp:tools")
    whole = issuer.token(f"{PUBLIC}/mcp", "mcp:tools")
    lacking = issuer.token(f"{PUBLIC}/mcp/coder", "openid")
    other_agent = issuer.token(f"{PUBLIC}/mcp/other", "mcp:tools")
    stranger = issuer.token(f"{PUBLIC}/mcp/coder", "mcp:tools", user="nobody")
    for token, http_status, socket_answer in (
            (good, 200, "id,jsonrpc,result"), (whole, 200, "id,jsonrpc,result"),
            (lacking, 403, 403), (other_agent, 401, 401), (stranger, 401, 401)):
        assert _post(gateway, token).status_code == http_status
        assert await _socket(gateway, token) == socket_answer


def test_the_metadata_names_the_configured_resource(gateway: LiveServer) -> None:
    body = httpx.get(f"{gateway.url}/.well-known/oauth-protected-resource/mcp/coder",
                     headers={"host": "evil.example"}).json()
    assert body["resource"] == f"{PUBLIC}/mcp/coder"


def test_a_configured_audience_alone_is_the_one_accepted(
        tmp_path: Path, issuer: Issuer) -> None:
    path, _ = _world_text(tmp_path, issuer, "access_recheck_s: 2",
                          audience="urn:hookgate:mcp")
    from hookgate.config import load_config
    from hookgate.runtime.deployment import deployment_from_config

    deployment = deployment_from_config(load_config(path, env={}))
    with live_server(deployment) as srv:
        assert _post(srv, issuer.token("urn:hookgate:mcp", "mcp:tools")).status_code == 200
        assert _post(srv, issuer.token(f"{srv.url}/mcp/coder", "mcp:tools")).status_code \
            == 401
        body = httpx.get(f"{srv.url}/.well-known/oauth-protected-resource/mcp/coder").json()
        assert body["resource"] == "urn:hookgate:mcp"
