"""Access tokens forged for the MCP gateway's OAuth: none may open a session. Each attempt
posts an ``initialize`` with a token that must be refused: unsigned (``alg: none``), signed
by another key under the issuer's key id, HMAC-signed with the issuer's public key as the
secret (algorithm confusion), issued for another agent's resource, or by another issuer."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tests.adversarial_tally import Tally
from tests.live_server import LiveServer
from tests.mcp_gateway.test_oauth import ISSUER, Issuer, gateway

__all__ = ["gateway"]

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "forger", "version": "1"}}}


def _claims(audience: str, **more: Any) -> dict[str, Any]:
    return {"iss": ISSUER, "sub": "alice", "aud": audience, "scope": "mcp:tools",
            "exp": int(time.time()) + 600, **more}


def _unsigned(claims: dict[str, Any]) -> str:
    return jwt.encode(claims, None, algorithm="none")  # type: ignore[arg-type]


def test_forged_access_tokens_open_no_session(gateway: tuple[LiveServer, Issuer],
                                              attempt: Tally) -> None:
    server, issuer = gateway
    url = f"{server.url}/mcp/coder"
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = issuer.key.public_key().public_bytes(Encoding.PEM,
                                                      PublicFormat.SubjectPublicKeyInfo)
    forged = {
        "an unsigned token (alg none)": _unsigned(_claims(url)),
        "a token signed by another key under the issuer's kid": jwt.encode(
            _claims(url), other, algorithm="RS256", headers={"kid": "k1"}),
        "an HS256 token keyed with the issuer's public key": _hs256(_claims(url), public_pem),
        "the issuer's token for another agent's resource": issuer.token(
            f"{server.url}/mcp/archivist", "mcp:tools"),
        "a token naming another issuer": jwt.encode(
            _claims(url, iss="https://evil.example"), issuer.key, algorithm="RS256",
            headers={"kid": "k1"}),
    }
    for what, token in forged.items():
        answer = httpx.post(url, json=INITIALIZE, headers={
            "accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {token}"})
        attempt.record(f"MCP OAuth: {what}", got_through=answer.status_code == 200)
        assert answer.status_code == 401, (what, answer.status_code, answer.text)
        assert 'error="invalid_token"' in answer.headers["www-authenticate"]


def _hs256(claims: dict[str, Any], secret: bytes) -> str:
    # PyJWT refuses a PEM as an HMAC key; sign by hand as an attacker would.
    import base64
    import hashlib
    import hmac

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    body = b64(json.dumps(claims).encode())
    mac = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(mac)}"
