"""A real OpenID Connect provider on loopback for the sign-in tests (oidc-provider-mock, a
Flask app on Authlib) and a person signing in at it: the provider's own authorization form,
submitted as a browser would."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import oidc_provider_mock
from werkzeug.serving import make_server

from hookgate.config.oidc import OidcSpec

CLIENT_ID = "hookgate-inbox"


@dataclass(frozen=True)
class MockProvider:
    url: str

    def set_user(self, sub: str, claims: dict[str, Any]) -> None:
        """The person's claims from now on (the provider's user directory)."""
        httpx.put(f"{self.url}/users/{sub}", json=claims, timeout=10).raise_for_status()

    def disable(self, sub: str) -> None:
        """Revoke every token of ``sub``: the next refresh is refused (a person disabled)."""
        httpx.post(f"{self.url}/users/{sub}/revoke-tokens", timeout=10).raise_for_status()


@contextmanager
def mock_provider() -> Iterator[MockProvider]:
    app = oidc_provider_mock.app(require_nonce=True)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield MockProvider(f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()


def spec(provider: MockProvider, **overrides: Any) -> OidcSpec:
    values: dict[str, Any] = {
        "issuer": provider.url, "client_id": CLIENT_ID, "client_secret": "inbox-secret",
        "org_claim": "org", "groups_claim": "groups", "admin_groups": ["hookgate-admins"],
        "approver_groups": ["approvers", "hookgate-admins"], "cookie_secure": False,
        "scopes": ["openid", "profile", "email"], **overrides}
    return OidcSpec(**values)


def authorize(authorization_url: str, sub: str) -> str:
    """The person ``sub`` signs in at the provider's form: the redirect URL it sends the
    browser back to (with ``code`` and ``state``)."""
    got = httpx.post(authorization_url, data={"sub": sub}, timeout=10)
    assert got.status_code in (302, 303), got.text[:500]
    return got.headers["location"]


def sign_in(client: httpx.Client, sub: str, return_to: str = "/") -> httpx.Response:
    """A browser's whole sign-in: hookgate's /auth/login, the provider, the callback. The
    client keeps the session cookie; the callback's response is returned."""
    start = client.get("/auth/login", params={"return_to": return_to})
    assert start.status_code == 302, start.text
    back = authorize(start.headers["location"], sub)
    return client.get(back)
