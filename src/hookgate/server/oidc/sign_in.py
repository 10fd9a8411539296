"""Sign-in through the provider and the sessions it opens: start (state, nonce, PKCE kept in
the database), finish (the ID token checked, the person's user found or created from ``iss`` +
``sub``), and the session's caller, re-checked at the provider at most every
``access_recheck_s`` (a refused refresh ends every session of that person, on every instance).
"""

from __future__ import annotations

import hmac
import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hookgate.config.oidc import OidcSpec
from hookgate.runtime.runtime import Caller
from hookgate.server.oidc.claims import person_of
from hookgate.server.oidc.provider import OidcError, Provider
from hookgate.server.oidc.sealing import RefreshSeal
from hookgate.storage import oidc_sessions as store
from hookgate.storage.database import Database
from hookgate.storage.oidc_sessions import PendingLogin, SignedIn, UnknownOrg
from hookgate.storage.types import utcnow

log = logging.getLogger(__name__)

#: How a caller signed in, as decisions record it.
METHOD_OIDC = "oidc"
#: Marks a pending sign-in the CLI started (before its loopback redirect URL).
_CLI = "cli:"


@dataclass(frozen=True, slots=True)
class Session:
    """A session's caller and its record (the CSRF token a browser must send back)."""

    caller: Caller
    record: SignedIn


class SignIn:
    """The server's sign-in through one provider."""

    def __init__(self, db: Database, spec: OidcSpec, redirect_url: str | None,
                 seal: RefreshSeal | None = None) -> None:
        self.db = db
        self.spec = spec
        self.provider = Provider(spec, redirect_url)
        #: Refresh tokens are stored only sealed (default: ``HOOKGATE_SECRETS_KEY``).
        self.seal = seal if seal is not None else RefreshSeal.from_environment()

    async def start(self, return_to: str = "/") -> tuple[str, str]:
        """The provider's URL to send the browser to, and the secret the browser keeps (its
        login cookie) to finish the sign-in with; the state is kept until the callback."""
        auth = await self.provider.authorization()
        binding = secrets.token_urlsafe(32)
        await store.save_login(self.db, PendingLogin(auth.state, auth.nonce,
                                                     auth.code_verifier, return_to,
                                                     store.session_digest(binding)))
        return auth.url, binding

    async def start_cli(self, redirect_url: str) -> tuple[str, str]:
        """`start` for the CLI, whose loopback listener at ``redirect_url`` gets the code."""
        auth = await self.provider.authorization(redirect_url)
        binding = secrets.token_urlsafe(32)
        await store.save_login(self.db, PendingLogin(auth.state, auth.nonce,
                                                     auth.code_verifier,
                                                     _CLI + redirect_url,
                                                     store.session_digest(binding)))
        return auth.url, binding

    async def finish(self, code: str, state: str, binding: str | None, *,
                     kind: str = "browser") -> tuple[str, str, str]:
        """The callback: (session id, CSRF token, where to go back). ``binding``: the secret
        `start` gave whoever started this sign-in. OidcError says why a sign-in is refused
        (unknown or replayed state, finished by another browser or process than the one
        that started it, a token that does not check, a browser's state finished by the
        CLI or the reverse)."""
        login = await store.take_login(self.db, state)
        if login is None:
            raise OidcError("unknown, used or expired sign-in state: start the sign-in again")
        if not binding or not hmac.compare_digest(store.session_digest(binding),
                                                  login.binding_sha256):
            raise OidcError("this sign-in was started elsewhere (another browser or "
                            "process): start the sign-in here")
        cli = login.return_to.startswith(_CLI)
        if cli != (kind == "cli"):
            raise OidcError("this sign-in was started by "
                            + ("the CLI" if cli else "a browser") + " and ends there")
        redirect = login.return_to.removeprefix(_CLI) if cli else None
        tokens = await self.provider.exchange(code, login.code_verifier, redirect)
        session_id, csrf = await self.open(tokens, login.nonce, kind=kind)
        return session_id, csrf, login.return_to

    async def open(self, tokens: dict[str, Any], nonce: str, *, kind: str) -> tuple[str, str]:
        """A session for the provider's ``tokens`` (their ID token checked against
        ``nonce``): (session id, CSRF token)."""
        id_token = tokens.get("id_token")
        if not isinstance(id_token, str):
            raise OidcError("the provider's answer has no ID token")
        claims = await self.provider.verify_id_token(id_token, nonce)
        access = tokens.get("access_token")
        if isinstance(access, str):
            extra = await self.provider.userinfo(access)
            if extra.get("sub") not in (None, claims["sub"]):
                raise OidcError("the provider's userinfo names another subject than the "
                                "ID token")
            claims = {**extra, **claims}
        person = person_of(self.spec, claims)
        refresh = tokens.get("refresh_token")
        # Sealed first: without a key, nothing of the sign-in is written.
        sealed = self.seal.seal(refresh) if isinstance(refresh, str) else None
        try:
            user_id = await store.record_person(self.db, person)
        except UnknownOrg as exc:
            raise OidcError(str(exc)) from exc
        return await store.open_session(self.db, person, user_id, kind=kind,
                                        refresh_token=sealed, ttl_s=self.spec.session_ttl_s)

    async def session(self, session_id: str) -> Session | None:
        """The caller of ``session_id`` now: None when it ended, expired, its user is
        disabled, or the provider no longer confirms the person (asked when the last check
        is ``access_recheck_s`` old)."""
        record = await store.signed_in(self.db, session_id)
        if record is None:
            return None
        if utcnow() - record.checked_at >= timedelta(seconds=self.spec.access_recheck_s):
            if not await self._recheck(record):
                return None
            record = await store.signed_in(self.db, session_id)
            if record is None:
                return None
        caller = Caller(record.user_id, record.org_id, record.admin, record.name,
                        record.service, issuer=record.issuer, subject=record.subject,
                        sign_in=METHOD_OIDC)
        return Session(caller, record)

    async def _recheck(self, record: SignedIn) -> bool:
        if not await store.claim_recheck(self.db, record.id_sha256, self.spec.access_recheck_s):
            # Another instance (or request) is checking it, or just did.
            return True
        try:
            refresh_token = (None if record.refresh_token is None
                             else self.seal.open(record.refresh_token))
        except OidcError as exc:
            # Our key does not open it (not the provider's word): this session ends.
            await store.end_session(self.db, record.id_sha256, str(exc))
            log.warning("ended a session of %s: %s", record.user_id, exc)
            return False
        try:
            if refresh_token is None:
                raise OidcError("the provider gave no refresh token to re-check the session "
                                "with")
            tokens = await self.provider.refresh(refresh_token)
            access = tokens.get("access_token")
            if not isinstance(access, str):
                raise OidcError("the provider's refresh gave no access token")
            claims = await self.provider.userinfo(access)
            if claims.get("sub") != record.subject:
                raise OidcError("the provider's userinfo names another subject")
            person = person_of(self.spec, claims)
            await store.record_person(self.db, person)
        except Exception as exc:  # fail closed: whatever failed, the provider did not confirm
            ended = await store.refuse_person(self.db, record.issuer, record.subject,
                                              f"the provider no longer confirms the "
                                              f"person: {exc}")
            log.warning("ended %d session(s) of %s: %s", ended, record.user_id, exc)
            return False
        refresh = tokens.get("refresh_token")
        await store.confirmed(self.db, record.id_sha256,
                              self.seal.seal(refresh) if isinstance(refresh, str) else None)
        return True

    async def logout_from_provider(self, logout_token: str) -> int:
        """A back-channel logout: every session of the person the provider's signed
        ``logout_token`` names ends; how many were open. OidcError when it does not check."""
        claims = await self.provider.verify_logout_token(logout_token)
        return await store.end_sessions_of(self.db, self.spec.issuer, str(claims["sub"]),
                                           "signed out at the identity provider")

    async def sign_out(self, session_id: str) -> None:
        await store.end_session(self.db, store.session_digest(session_id), "signed out")
