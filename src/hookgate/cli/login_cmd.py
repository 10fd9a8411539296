"""``hookgate login`` and ``hookgate logout``: the CLI signs a person in to a server through
its OpenID Connect provider (a browser redirect to a loopback listener, RFC 8252) and keeps
the session in the credentials file, which the commands that talk to a server then use."""

from __future__ import annotations

import threading
import webbrowser
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Annotated, Any
from urllib.parse import parse_qs, urlsplit

import typer

from hookgate.cli.app import app, console, fail

UrlOption = Annotated[str, typer.Option(envvar="HOOKGATE_URL",
                                        help="The server's base URL.")]


class _Callback:
    """The loopback listener the provider sends the browser back to: the code and state."""

    def __init__(self) -> None:
        self.query: dict[str, str] = {}
        self.done = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path != "/callback" or outer.done.is_set():
                    self.send_error(404)
                    return
                outer.query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                body = b"hookgate: sign-in received; you can close this window.\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                outer.done.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/callback"


def _base(url: str) -> str:
    from hookgate.cli.server_url import NotAServerUrl, server_base

    try:
        return server_base(url)
    except NotAServerUrl as exc:
        fail(str(exc), 2)


def _post(url: str, body: dict[str, Any], token: str | None = None) -> Any:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        r = httpx.post(url, json=body, headers=headers, timeout=30)
    except httpx.HTTPError as exc:
        fail(f"cannot reach the server at {url}: {exc}")
    if r.status_code >= 400:
        try:
            message = r.json().get("error") or r.json().get("detail") or r.text
        except ValueError:
            message = r.text
        fail(f"{r.status_code}: {message}")
    return r.json() if r.content else None


@app.command()
def login(
    url: UrlOption = "http://127.0.0.1:8000",
    browser: Annotated[bool, typer.Option(help="Open the sign-in page in a browser.")] = True,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the sign-in.")] = 300,
) -> None:
    """Sign in to a server through its identity provider (``oidc:`` on the server).

    The session is kept in $XDG_CONFIG_HOME/hookgate/credentials.json (mode 0600) and used
    by `hookgate approvals` and `hookgate rules` when no --token is given.
    """
    from hookgate.cli.credentials import CredentialsError, save_session

    base = _base(url)
    callback = _Callback()
    started: dict[str, Any] = {}
    thread = threading.Thread(target=callback.server.serve_forever, daemon=True)
    thread.start()
    try:
        started = _post(f"{base}/auth/cli/start", {"redirect_url": callback.url})
        auth_url = str(started["authorization_url"])
        # Printed whole, on a line of its own (a terminal wraps it; nothing cuts it).
        print(f"Open this address to sign in:\n{auth_url}", flush=True)
        if browser:
            webbrowser.open(auth_url)
        if not callback.done.wait(timeout):
            fail(f"no sign-in within {timeout:g} s; run `hookgate login` again")
    finally:
        callback.server.shutdown()
        callback.server.server_close()
    query = callback.query
    if "error" in query:
        fail(f"the identity provider refused the sign-in: {query['error']} "
             f"{query.get('error_description', '')}".strip())
    if not query.get("code") or not query.get("state"):
        fail("the identity provider sent no code and state back")
    done = _post(f"{base}/auth/cli/finish", {"code": query["code"], "state": query["state"],
                                             "login_secret": started["login_secret"]})
    try:
        path = save_session(base, str(done["session"]), str(done["user_id"]),
                            str(done["org_id"]))
    except CredentialsError as exc:
        fail(str(exc))
    console.print(f"Signed in to {base} as {done['user_id']} (org {done['org_id']}); "
                  f"session kept in {path}", soft_wrap=True)


@app.command()
def logout(url: UrlOption = "http://127.0.0.1:8000") -> None:
    """End the CLI's session on a server and remove it from the credentials file."""
    from hookgate.cli.credentials import CredentialsError, forget_session, saved_session

    base = _base(url)
    try:
        session = saved_session(base)
    except CredentialsError as exc:
        fail(str(exc))
    if session is None:
        fail(f"not signed in to {base}", 2)
    _post(f"{base}/auth/logout", {}, token=session)
    forget_session(base)
    console.print(f"Signed out of {base}", soft_wrap=True)
