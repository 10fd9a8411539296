"""An OpenID Connect provider on 127.0.0.1 whose signing keys the test holds: discovery and a
JWKS (swappable, a key rotation), and tokens signed as the test says (or forged)."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

CLIENT = "hookgate-inbox"
NONCE = "n-0123456789"


class KeyServer:
    """Discovery and a JWKS on 127.0.0.1, the JWKS swappable (a key rotation)."""

    def __init__(self) -> None:
        self.keys = [RSAKey.generate_key(2048, parameters={"kid": "k1"})]
        self.jwks_fetches = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    body: dict[str, Any] = {
                        "issuer": outer.url, "authorization_endpoint": f"{outer.url}/auth",
                        "token_endpoint": f"{outer.url}/token",
                        "jwks_uri": f"{outer.url}/jwks",
                        "id_token_signing_alg_values_supported": ["RS256", "none",
                                                                  "HS256"]}
                elif self.path == "/jwks":
                    outer.jwks_fetches += 1
                    body = KeySet(list(outer.keys)).as_dict(private=False)
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def token(self, key: Any = None, alg: str = "RS256", **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.url, "aud": CLIENT, "sub": "carol-sub", "iat": now,
                "exp": now + 300, "nonce": NONCE, **claims}
        body = {k: v for k, v in body.items() if v is not None}
        signing = key if key is not None else self.keys[0]
        header = {"alg": alg, "kid": signing.kid} if hasattr(signing, "kid") and signing.kid \
            else {"alg": alg}
        return jwt.encode(header, body, signing, algorithms=[alg])
