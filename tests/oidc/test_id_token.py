"""The ID token's check against a provider on loopback whose keys the test holds: forged,
expired, wrong-audience, wrong-issuer, replayed-nonce, ``alg: none`` and HMAC tokens refused;
signing keys rotated (the JWKS fetched again for an unknown key id); ±60 s of clock skew."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey

from hookgate.config.oidc import OidcSpec
from hookgate.server.oidc.provider import OidcError, Provider
from tests.oidc.keys import CLIENT, NONCE, KeyServer


def provider(keys: KeyServer) -> Provider:
    return Provider(OidcSpec(issuer=keys.url, client_id=CLIENT, client_secret="s3cret",
                             org="acme"), f"{keys.url}/cb")


async def test_a_good_token_passes_and_the_claims_come_back(keys: KeyServer) -> None:
    claims = await provider(keys).verify_id_token(keys.token(), NONCE)
    assert claims["sub"] == "carol-sub"


@pytest.mark.parametrize("what", ["forged", "expired", "wrong_aud", "wrong_iss",
                                  "replayed_nonce", "no_nonce", "no_sub", "tampered"])
async def test_bad_tokens_are_refused(keys: KeyServer, what: str) -> None:
    now = int(time.time())
    attacker = RSAKey.generate_key(2048, parameters={"kid": "k1"})  # the provider's kid
    token = {
        "forged": lambda: keys.token(key=attacker),
        "expired": lambda: keys.token(exp=now - 3600, iat=now - 7200),
        "wrong_aud": lambda: keys.token(aud="another-client"),
        "wrong_iss": lambda: keys.token(iss="https://evil.example"),
        "replayed_nonce": lambda: keys.token(nonce="the-nonce-of-an-earlier-sign-in"),
        "no_nonce": lambda: keys.token(nonce=None),
        "no_sub": lambda: keys.token(sub=None),
        "tampered": lambda: _swap_payload(keys.token(), sub="alice"),
    }[what]()
    with pytest.raises(OidcError):
        await provider(keys).verify_id_token(token, NONCE)


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _swap_payload(token: str, **changes: Any) -> str:
    head, payload, sig = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return ".".join([head, _b64({**claims, **changes}), sig])


async def test_alg_none_and_hmac_tokens_are_refused(keys: KeyServer) -> None:
    now = int(time.time())
    claims = {"iss": keys.url, "aud": CLIENT, "sub": "carol-sub", "iat": now,
              "exp": now + 300, "nonce": NONCE}
    unsigned = f"{_b64({'alg': 'none'})}.{_b64(claims)}."
    with pytest.raises(OidcError, match="algorithm"):
        await provider(keys).verify_id_token(unsigned, NONCE)
    # HS256 keyed with the client secret, which the discovery document lists: refused too.
    hmac_token = jwt.encode({"alg": "HS256"}, claims, OctKey.import_key("s3cret" * 6),
                            algorithms=["HS256"])
    with pytest.raises(OidcError, match="algorithm"):
        await provider(keys).verify_id_token(hmac_token, NONCE)


async def test_rotated_signing_keys_are_fetched_again(keys: KeyServer) -> None:
    client = provider(keys)
    client.jwks_refetch_min_s = 0  # the rotation follows at once here
    await client.verify_id_token(keys.token(), NONCE)
    assert keys.jwks_fetches == 1
    await client.verify_id_token(keys.token(), NONCE)
    assert keys.jwks_fetches == 1  # the keys are kept while they verify
    old = keys.keys[0]
    keys.keys = [RSAKey.generate_key(2048, parameters={"kid": "k2"})]
    claims = await client.verify_id_token(keys.token(), NONCE)
    assert claims["sub"] == "carol-sub" and keys.jwks_fetches == 2
    # A token still signed with the retired key no longer verifies.
    with pytest.raises(OidcError):
        await client.verify_id_token(keys.token(key=old), NONCE)


async def test_made_up_key_ids_cost_the_provider_one_fetch_per_interval(
        keys: KeyServer) -> None:
    client = provider(keys)
    await client.verify_id_token(keys.token(), NONCE)
    for n in range(5):
        stranger = RSAKey.generate_key(2048, parameters={"kid": f"made-up-{n}"})
        with pytest.raises(OidcError):
            await client.verify_id_token(keys.token(key=stranger), NONCE)
    # The first unknown key id past the interval fetched again, none of the others.
    assert keys.jwks_fetches == 1


@pytest.mark.parametrize(("shift", "ok"), [(-30, True), (30, True), (-120, False),
                                           (120, False)])
async def test_sixty_seconds_of_clock_skew_are_accepted_and_no_more(
        keys: KeyServer, shift: int, ok: bool) -> None:
    """``shift`` < 0: the token expired that long ago (our clock is ahead); > 0: it is not
    valid before that many seconds from now (the provider's clock is ahead)."""
    now = int(time.time())
    token = (keys.token(exp=now + shift, iat=now - 600) if shift < 0
             else keys.token(nbf=now + shift, iat=now + shift, exp=now + 600))
    if ok:
        assert (await provider(keys).verify_id_token(token, NONCE))["sub"] == "carol-sub"
    else:
        with pytest.raises(OidcError):
            await provider(keys).verify_id_token(token, NONCE)


async def test_a_discovery_naming_another_issuer_is_refused(keys: KeyServer) -> None:
    spec = OidcSpec(issuer=keys.url + "/tenant", client_id=CLIENT, org="acme")
    with pytest.raises(OidcError):
        await Provider(spec, None).verify_id_token(keys.token(), NONCE)
