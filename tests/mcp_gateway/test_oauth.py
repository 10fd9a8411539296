"""The HTTP gateway as an OAuth 2.1 protected resource: its metadata (RFC 9728), a 401 that
names it, the issuer's access tokens taken by the official ``mcp`` client when they carry the
scope, refused (403 ``insufficient_scope``) when they do not, and hookgate's own tokens
working beside them. The issuer is a key pair whose JWKS a loopback server publishes."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.fakes.server import LoopbackServer
from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.world import auth, make_world

ISSUER = "http://127.0.0.1/issuer"  # the tokens' iss (the keys are fetched from jwks_url)
#: The gateway's configured URL: the tokens' audience is taken from it, never from a request.
PUBLIC = "https://gate.example"
RESOURCE = f"{PUBLIC}/mcp/coder"


class Issuer:
    """An authorization server's signing key, and its JWKS on loopback."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwks = {"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}
        self.server = LoopbackServer(Starlette(routes=[
            Route("/jwks.json", lambda _r: JSONResponse(jwks))]))

    def token(self, audience: str, scope: str, user: str = "alice", **claims: Any) -> str:
        body = {"iss": ISSUER, "sub": user, "aud": audience, "scope": scope,
                "exp": int(time.time()) + 600, "iat": int(time.time()), **claims}
        return jwt.encode(body, self.key, algorithm="RS256", headers={"kid": "k1"})


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Issuer]]:
    root = tmp_path_factory.mktemp("oauth")
    issuer = Issuer()
    issuer.server.start()
    # Only git's tools are looked for: the gateway starts no time server.
    world = make_world(root, f"sqlite+aiosqlite:///{root / 'hookgate.db'}",
                       coder_servers=["git"])
    config = world.config_path.read_text().replace(
        "server: {public_url: http://127.0.0.1:9}",
        "server:\n  public_url: " + PUBLIC + "\n  mcp_oauth: {issuer: " + ISSUER
        + ", jwks_url: " + issuer.server.url + "/jwks.json, scopes: [mcp:tools]}")
    assert "mcp_oauth" in config
    world.config_path.write_text(config)
    with live_server(world.deployment()) as srv:
        yield srv, issuer


@asynccontextmanager
async def client_with(url: str, token: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                              timeout=httpx2.Timeout(30.0))
    async with Client(streamable_http_client(url, http_client=http)) as client:
        yield client


def test_a_401_names_the_resource_metadata_which_names_the_issuer_and_scopes(
        gateway: tuple[LiveServer, Issuer]) -> None:
    server, _issuer = gateway
    refused = httpx.post(f"{server.url}/mcp/coder", json={})
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    path = "/.well-known/oauth-protected-resource/mcp/coder"
    assert challenge.startswith("Bearer ") and f'resource_metadata="{PUBLIC}{path}"' in challenge
    assert 'scope="mcp:tools"' in challenge
    metadata = httpx.get(f"{server.url}{path}").json()
    assert metadata["resource"] == RESOURCE
    assert metadata["authorization_servers"] == [ISSUER]
    assert metadata["scopes_supported"] == ["mcp:tools"]


async def test_an_access_token_with_the_scope_lists_the_agents_tools(
        gateway: tuple[LiveServer, Issuer]) -> None:
    server, issuer = gateway
    url = f"{server.url}/mcp/coder"
    async with client_with(url, issuer.token(RESOURCE, "openid mcp:tools")) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert "mcp__git__git_status" in names


def test_a_token_without_the_scope_or_for_another_resource_is_refused(
        gateway: tuple[LiveServer, Issuer]) -> None:
    server, issuer = gateway
    url = f"{server.url}/mcp/coder"
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"accept": "application/json, text/event-stream"}

    def post(token: str) -> httpx.Response:
        return httpx.post(url, json=body, headers={**headers,
                                                   "Authorization": f"Bearer {token}"})

    lacking = post(issuer.token(RESOURCE, "openid profile"))
    assert lacking.status_code == 403
    assert 'error="insufficient_scope"' in lacking.headers["www-authenticate"]
    assert "mcp:tools" in lacking.json()["error"]
    elsewhere = post(issuer.token("https://other.example/mcp", "mcp:tools"))
    assert elsewhere.status_code == 401
    assert 'error="invalid_token"' in elsewhere.headers["www-authenticate"]
    expired = post(issuer.token(RESOURCE, "mcp:tools", exp=int(time.time()) - 3600))
    assert expired.status_code == 401
    stranger = post(issuer.token(RESOURCE, "mcp:tools", user="nobody"))
    assert stranger.status_code == 401 and "nobody" in stranger.json()["error"]
    # hookgate's own API token stays a simple option.
    own = httpx.post(url, json=body, headers={**headers, **auth("alice")})
    assert own.status_code == 200, own.text


def test_other_paths_have_no_metadata(gateway: tuple[LiveServer, Issuer]) -> None:
    server, _issuer = gateway
    assert httpx.get(f"{server.url}/.well-known/oauth-protected-resource/api").status_code \
        == 404
