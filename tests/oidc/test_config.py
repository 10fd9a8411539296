"""The ``oidc:`` section: what it refuses with a one-line reason, the client secret read from
the environment, and the authorization request it makes (state, nonce, PKCE S256, and a
provider's extra parameters) at a real provider on loopback."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from hookgate.config.errors import ConfigError
from hookgate.config.loader import parse_config
from hookgate.server.oidc.provider import Provider
from tests.oidc.provider import mock_provider, spec

BASE = """
orgs: [{id: acme}]
server: {public_url: "https://hookgate.example.com"}
oidc:
"""


@pytest.mark.parametrize(("section", "says"), [
    ("  {issuer: 'http://idp.example.com', client_id: c, org: acme}", "https://"),
    ("  {issuer: 'https://idp.example.com', client_id: c}", "org_claim or org"),
    ("  {issuer: 'https://idp.example.com', client_id: c, org: acme, scopes: [email]}",
     "openid"),
    ("  {issuer: 'https://idp.example.com', client_id: c, org: acme, "
     "authorize_params: {nonce: x}}", "may not set nonce"),
    ("  {issuer: 'https://idp.example.com', client_id: c, org: acme, access_recheck_s: 0}",
     "access_recheck_s"),
    ("  {issuer: 'https://idp.example.com', client_id: c, org: acme, grups: x}", "grups"),
])
def test_a_bad_oidc_section_is_refused_saying_why(section: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        parse_config(BASE + section, source="t.yaml")


def test_the_client_secret_comes_from_the_environment() -> None:
    cfg = parse_config(BASE + "  {issuer: 'https://idp.example.com/', client_id: c, "
                       "client_secret: '${IDP_SECRET}', org_claim: tenant}",
                       source="t.yaml", env={"IDP_SECRET": "s3cret"})
    assert cfg.oidc is not None
    assert cfg.oidc.client_secret == "s3cret" and cfg.oidc.issuer == "https://idp.example.com"
    assert cfg.oidc.tokens_for_people is True and cfg.oidc.cookie_secure is True


async def test_the_authorization_request_carries_state_nonce_and_pkce() -> None:
    with mock_provider() as idp:
        provider = Provider(spec(idp, authorize_params={"access_type": "offline"}),
                            "https://hookgate.example.com/auth/callback")
        first = await provider.authorization()
        second = await provider.authorization()
    query = {k: v[0] for k, v in parse_qs(urlsplit(first.url).query).items()}
    assert query["state"] == first.state and query["nonce"] == first.nonce
    assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) >= 43
    assert first.code_verifier not in first.url
    assert query["access_type"] == "offline" and query["response_type"] == "code"
    assert query["redirect_uri"] == "https://hookgate.example.com/auth/callback"
    # Fresh randomness for every sign-in.
    assert {first.state, first.nonce, first.code_verifier}.isdisjoint(
        {second.state, second.nonce, second.code_verifier})
