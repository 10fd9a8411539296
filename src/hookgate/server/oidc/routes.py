"""The sign-in routes: ``/auth/login`` and ``/auth/callback`` (the browser, through the
provider), ``/auth/session`` (who is signed in, and the CSRF token), ``/auth/logout``, and
``/auth/cli/start`` + ``/auth/cli/finish`` (the CLI, through a loopback redirect)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse
from pydantic import BaseModel, Field

from hookgate.server.auth import (
    CSRF_HEADER,
    SESSION_COOKIE,
    session_caller,
    sign_in_of,
)
from hookgate.server.oidc.errors import OidcError
from hookgate.storage.oidc_sessions import LOGIN_TTL, SESSION_PREFIX

if TYPE_CHECKING:
    from hookgate.server.oidc.sign_in import SignIn

router = APIRouter(prefix="/auth", tags=["sign-in"])
#: The cookie holding the secret of a browser's sign-in under way.
LOGIN_COOKIE = "hookgate_login"


class SessionStatus(BaseModel):
    """Whether this browser is signed in through the identity provider, and as whom."""

    signed_in: bool
    #: Whether the server offers sign-in through an identity provider at all.
    oidc: bool
    user_id: str | None = None
    org_id: str | None = None
    admin: bool | None = None
    name: str | None = None
    issuer: str | None = None
    subject: str | None = None
    #: Sent back in ``csrf_header`` with every state-changing request of this session.
    csrf_token: str | None = None
    csrf_header: str | None = None


class SignedOut(BaseModel):
    signed_out: bool


class LoggedOut(BaseModel):
    #: How many sessions of the person ended.
    ended: int


class CliStarted(BaseModel):
    #: Where the person's browser signs in at the provider.
    authorization_url: str
    #: Sent back to ``/auth/cli/finish``: only the process that started may finish.
    login_secret: str


class CliSession(BaseModel):
    #: The session id, sent as ``Authorization: Bearer <session>``.
    session: str
    user_id: str
    org_id: str
    expires_in: int


def _sign_in(request: Request) -> SignIn:
    found = sign_in_of(request)
    if found is None:
        raise HTTPException(404, "sign-in through an identity provider is not configured "
                                 "(oidc: in the configuration)")
    return found


def _local_path(value: str) -> str:
    """``return_to`` only within this site: a path, never another origin."""
    if not value.startswith("/") or value.startswith("//") or "\\" in value:
        raise HTTPException(400, "return_to must be a path on this server, such as '/'")
    return value


@router.get("/login", include_in_schema=False)
async def login(request: Request, return_to: str = Query("/")) -> RedirectResponse:
    sign_in = _sign_in(request)
    try:
        url, binding = await sign_in.start(_local_path(return_to))
    except OidcError as exc:
        raise HTTPException(502, f"sign-in could not start: {exc}") from exc
    out = RedirectResponse(url, status_code=302)
    # The callback finishes only in the browser that started the sign-in (no login CSRF).
    out.set_cookie(LOGIN_COOKIE, binding, max_age=int(LOGIN_TTL.total_seconds()),
                   path="/auth", secure=sign_in.spec.cookie_secure, httponly=True,
                   samesite="lax")
    return out


@router.get("/callback", include_in_schema=False)
async def callback(request: Request, code: str | None = None, state: str | None = None,
                   error: str | None = None,
                   error_description: str | None = None) -> RedirectResponse:
    sign_in = _sign_in(request)
    if error is not None:
        raise HTTPException(400, f"the identity provider refused the sign-in: {error}"
                                 + (f" ({error_description})" if error_description else ""))
    if not code or not state:
        raise HTTPException(400, "the callback needs 'code' and 'state'")
    try:
        session_id, _, return_to = await sign_in.finish(code, state,
                                                        request.cookies.get(LOGIN_COOKIE))
    except OidcError as exc:
        raise HTTPException(401, f"sign-in refused: {exc}") from exc
    out = RedirectResponse(return_to, status_code=302)
    out.delete_cookie(LOGIN_COOKIE, path="/auth", secure=sign_in.spec.cookie_secure,
                      httponly=True, samesite="lax")
    out.set_cookie(SESSION_COOKIE, session_id, max_age=int(sign_in.spec.session_ttl_s),
                   path="/", secure=sign_in.spec.cookie_secure, httponly=True,
                   samesite="lax")
    return out


@router.get("/session", response_model=SessionStatus, response_model_exclude_none=True)
async def current_session(request: Request) -> dict[str, Any]:
    """The signed-in person of the browser's cookie and the CSRF token its state-changing
    requests send in ``X-CSRF-Token``; ``signed_in: false`` without a session (the portal
    asks on every load, before anyone signed in). ``oidc``: whether this server offers
    sign-in through an identity provider at all."""
    sign_in = sign_in_of(request)
    if sign_in is None:
        return {"signed_in": False, "oidc": False}
    session_id = request.cookies.get(SESSION_COOKIE)
    session = None if session_id is None else await sign_in.session(session_id)
    if session is None:
        return {"signed_in": False, "oidc": True}
    c = session.caller
    return {"signed_in": True, "oidc": True, "user_id": c.user_id, "org_id": c.org_id,
            "admin": c.admin, "name": c.name, "issuer": c.issuer, "subject": c.subject,
            "csrf_token": session.record.csrf_token, "csrf_header": CSRF_HEADER}


@router.post("/logout", response_model=SignedOut)
async def logout(request: Request) -> Response:
    """End the caller's session (the cookie's, with its CSRF token, or the CLI's)."""
    sign_in = _sign_in(request)
    header = request.headers.get("authorization", "")
    token = header.partition(" ")[2].strip() or None
    caller = await session_caller(request, token)
    if caller is None:
        raise HTTPException(401, "not signed in through the identity provider")
    session_id = token if token and token.startswith(SESSION_PREFIX) \
        else request.cookies.get(SESSION_COOKIE)
    assert session_id is not None
    await sign_in.sign_out(session_id)
    out = JSONResponse({"signed_out": True})
    out.delete_cookie(SESSION_COOKIE, path="/", secure=sign_in.spec.cookie_secure,
                      httponly=True, samesite="lax")
    return out


@router.post("/backchannel-logout", response_model=LoggedOut)
async def backchannel_logout(request: Request) -> JSONResponse:
    """OpenID Connect Back-Channel Logout: the provider posts a signed ``logout_token``
    (form-encoded); every session of the person it names ends, on every instance."""
    sign_in = _sign_in(request)
    # Form-encoded (the specification's only encoding), parsed without a multipart parser.
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    token = (form.get("logout_token") or [""])[0]
    if not token:
        raise HTTPException(400, "the request carries no logout_token")
    try:
        ended = await sign_in.logout_from_provider(token)
    except OidcError as exc:
        raise HTTPException(400, f"logout refused: {exc}") from exc
    return JSONResponse({"ended": ended}, headers={"Cache-Control": "no-store"})


class CliStart(BaseModel):
    #: The CLI's loopback listener the provider redirects to.
    redirect_url: str = Field(min_length=1, max_length=512)


class CliFinish(BaseModel):
    code: str = Field(min_length=1, max_length=4096)
    state: str = Field(min_length=1, max_length=128)
    login_secret: str = Field(min_length=1, max_length=128)


def _loopback(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "::1") or not parts.port:
        raise HTTPException(400, "redirect_url must be http://127.0.0.1:<port>/... (the "
                                 "CLI's loopback listener)")
    return url


@router.post("/cli/start", response_model=CliStarted)
async def cli_start(request: Request, body: CliStart) -> dict[str, str]:
    """Start the CLI's sign-in: the provider URL for the person's browser."""
    sign_in = _sign_in(request)
    try:
        url, binding = await sign_in.start_cli(_loopback(body.redirect_url))
    except OidcError as exc:
        raise HTTPException(502, f"sign-in could not start: {exc}") from exc
    return {"authorization_url": url, "login_secret": binding}


@router.post("/cli/finish", response_model=CliSession)
async def cli_finish(request: Request, body: CliFinish) -> dict[str, Any]:
    """Finish the CLI's sign-in: the session id it sends as its bearer token."""
    sign_in = _sign_in(request)
    try:
        session_id, _, _ = await sign_in.finish(body.code, body.state, body.login_secret,
                                                kind="cli")
    except OidcError as exc:
        raise HTTPException(401, f"sign-in refused: {exc}") from exc
    session = await sign_in.session(session_id)
    assert session is not None
    return {"session": session_id, "user_id": session.caller.user_id,
            "org_id": session.caller.org_id, "expires_in": int(sign_in.spec.session_ttl_s)}
