"""The HTTP clients of the guarded-call API (``/api/v1``): ``Client`` (sync) and ``AsyncClient``
(async), over httpx. Fail closed: hookgate unreachable or failing (5xx) is GuardUnavailable
with the reason; a redirect (never followed) or an answer of the wrong shape is
GuardAnswerInvalid naming what was wrong; a 4xx, or input JSON cannot carry (arguments that
are not an object with text keys, NaN, infinities, lone surrogates, nesting too deep, objects
that are not JSON), is GuardRefused and nothing is sent. ``wait`` is one long-poll request (``GET
/api/v1/calls/{id}?wait=S``), never a sleep loop.
"""

from __future__ import annotations

import json as jsonlib
import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from hookgate.client import wire
from hookgate.client.arguments import ArgumentsNotJSON, checked_arguments
from hookgate.client.errors import (
    GuardAnswerInvalid,
    GuardRedirected,
    GuardRefused,
    GuardUnavailable,
)
from hookgate.client.types import Decision, Observation, SessionStarted, Verdict
from hookgate.tls import client_context

__all__ = ["AsyncClient", "Client"]
#: Seconds a request may take beyond the long-poll it asks for.
MARGIN_S = 10.0
#: The deepest nesting of arrays and objects a request may carry (the body's own two levels
#: included); deeper input is refused before anything is sent.
MAX_NESTING = 64


def _answer(response: httpx.Response) -> Mapping[str, Any]:
    """The JSON object of a documented answer (HTTP 200); anything else is an error: a 5xx
    GuardUnavailable, a 4xx GuardRefused, a redirect GuardRedirected (never followed), any
    other status or a body that is not a JSON object GuardAnswerInvalid."""
    status = response.status_code
    if status >= 500:
        raise GuardUnavailable(f"hookgate failed (HTTP {status}: {_detail(response)}), so "
                               "the call does not run")
    if status >= 400:
        raise GuardRefused(f"hookgate refused the request (HTTP {status}): "
                           f"{_detail(response)}", status)
    if 300 <= status < 400:
        location = response.headers.get("Location")
        raise GuardRedirected(
            f"hookgate answered HTTP {status}, a redirect to {location or '(no Location)'}; "
            "the client does not follow redirects, so the call does not run (give the "
            "client hookgate's own URL)", location)
    if status != 200:
        raise GuardAnswerInvalid(f"hookgate answered HTTP {status}, not 200, so the call "
                                 "does not run")
    try:
        body = jsonlib.loads(response.content, parse_constant=_not_json)
    except ValueError:
        kind = response.headers.get("Content-Type") or "no content type"
        raise GuardAnswerInvalid(f"hookgate's answer is not JSON ({kind}: "
                                 f"{response.text[:100]!r}), so the call does not run"
                                 ) from None
    if not isinstance(body, dict):
        raise GuardAnswerInvalid(f"hookgate's answer is {wire.json_kind(body)}, not an object, "
                                 "so the call does not run")
    return body


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    return str(detail) if detail else response.text[:300]


def _unreachable(base_url: str, exc: Exception) -> GuardUnavailable:
    return GuardUnavailable(f"hookgate at {base_url} is unreachable ({type(exc).__name__}: "
                            f"{exc}), so the call does not run")


def _encoded(body: Any) -> bytes:
    """The request body as JSON bytes; GuardRefused (nothing is sent) for what JSON cannot
    carry exactly."""
    if _nesting(body) > MAX_NESTING:
        raise GuardRefused(f"hookgate refused the request before sending it: the arguments "
                           f"nest deeper than {MAX_NESTING} levels")
    try:
        return jsonlib.dumps(body, ensure_ascii=False, allow_nan=False,
                             separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        raise GuardRefused("hookgate refused the request before sending it: a text holds a "
                           "lone surrogate, which JSON cannot carry") from None
    except ValueError as exc:  # NaN and the infinities
        raise GuardRefused(f"hookgate refused the request before sending it: {exc} (NaN and "
                           "infinities have no JSON form)") from None
    except RecursionError:
        raise GuardRefused("hookgate refused the request before sending it: the arguments "
                           "nest too deeply for JSON") from None
    except TypeError as exc:
        raise GuardRefused(f"hookgate refused the request before sending it: {exc}") from None


def _nesting(value: Any) -> int:
    """How deep arrays and objects nest in ``value`` (without recursion; stops counting past
    MAX_NESTING)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if level > MAX_NESTING:
            return level
        stack.extend((child, level + 1) for child in children)
    return deepest


def _call_path(call: str, tail: str = "") -> str:
    if not isinstance(call, str) or not call:
        raise GuardRefused(f"hookgate refused the request before sending it: {call!r} is not "
                           "a call id")
    try:
        return f"/api/v1/calls/{quote(call, safe='')}{tail}"
    except UnicodeEncodeError:
        raise GuardRefused("hookgate refused the request before sending it: the call id holds "
                           "a lone surrogate") from None


def _wait_params(timeout: float, peek: bool = False) -> dict[str, Any]:
    if (isinstance(timeout, bool) or not isinstance(timeout, int | float)
            or not math.isfinite(timeout) or timeout < 0):
        raise GuardRefused(f"hookgate refused the request before sending it: the wait "
                           f"{timeout!r} is not a number of seconds >= 0")
    return {"wait": timeout, "peek": "true"} if peek else {"wait": timeout}


def _call_body(agent: str, session_id: str, call_id: str, tool: str,
               arguments: Mapping[str, Any], description: str | None,
               parameters: Mapping[str, Any] | None,
               parent_session: str | None, acts_for: str | None) -> dict[str, Any]:
    try:
        checked = checked_arguments(arguments)
    except ArgumentsNotJSON as exc:
        raise GuardRefused(f"hookgate refused the request before sending it: {exc}") from None
    return {"agent": agent, "session_id": session_id, "call_id": call_id, "tool": tool,
            "arguments": checked, "description": description,
            "parameters": dict(parameters) if parameters is not None else None,
            "parent_session": parent_session, **_acting(acts_for)}


def _request(request: str | None) -> dict[str, str]:
    """The session body's ``request``: what the user asked (absent when not given)."""
    return {} if request is None else {"request": request}


def _acting(acts_for: str | None) -> dict[str, str]:
    """The body's ``acts_for`` (absent when the call acts for nobody named)."""
    if acts_for is None:
        return {}
    if not isinstance(acts_for, str) or not acts_for:
        raise GuardRefused(f"hookgate refused the request before sending it: acts_for "
                           f"{acts_for!r} is not a user id")
    return {"acts_for": acts_for}


class _Base:
    def __init__(self, base_url: str, token: str, *, framework: str,
                 timeout: float = 30.0, acts_for: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.framework = framework
        #: The person the token's calls act for (a service identity's), unless a session
        #: or call names another.
        self.acts_for = acts_for
        self.timeout = timeout
        #: The person a service identity's sessions and calls act for (``acts_for``).
        self.acts_for = acts_for
        self._acts: dict[str, str] = {} if acts_for is None else {"acts_for": acts_for}
        self.headers = {"Authorization": f"Bearer {token}", "X-Hookgate-Framework": framework}
        self._json_headers = {**self.headers, "Content-Type": "application/json"}


class AsyncClient(_Base):
    """An AsyncGuard over a hookgate server."""

    def __init__(self, base_url: str, token: str, *, framework: str, timeout: float = 30.0,
                 http: httpx.AsyncClient | None = None, acts_for: str | None = None) -> None:
        super().__init__(base_url, token, framework=framework, timeout=timeout,
                         acts_for=acts_for)
        self._http = http or httpx.AsyncClient(timeout=timeout, verify=client_context())

    async def _request(self, method: str, path: str, *, json: Any = None,
                       params: Mapping[str, Any] | None = None,
                       seconds: float | None = None) -> Mapping[str, Any]:
        content = _encoded(json) if json is not None else None
        try:
            response = await self._http.request(
                method, self.base_url + path, content=content, params=params,
                headers=self.headers if content is None else self._json_headers,
                follow_redirects=False,
                timeout=seconds if seconds is not None else self.timeout)
        except httpx.HTTPError as exc:
            raise _unreachable(self.base_url, exc) from exc
        return _answer(response)

    async def start_session(self, *, agent: str, session_id: str,
                            parent_session: str | None = None,
                            acts_for: str | None = None,
                            request: str | None = None) -> SessionStarted:
        return wire.session(await self._request("POST", "/api/v1/sessions", json={
            "agent": agent, "session_id": session_id, "parent_session": parent_session,
            **_request(request), **_acting(acts_for or self.acts_for)}))

    async def before_call(self, *, agent: str, session_id: str, call_id: str, tool: str,
                          arguments: Mapping[str, Any], description: str | None = None,
                          parameters: Mapping[str, Any] | None = None,
                          parent_session: str | None = None,
                          acts_for: str | None = None) -> Verdict:
        return wire.verdict(await self._request("POST", "/api/v1/calls", json=_call_body(
            agent, session_id, call_id, tool, arguments, description, parameters,
            parent_session, acts_for or self.acts_for)))

    async def wait(self, call: str, *, timeout: float) -> Verdict:  # noqa: ASYNC109
        # The long-poll's length, sent to the server (the interface's name for it).
        return wire.verdict(await self._request(
            "GET", _call_path(call), params=_wait_params(timeout),
            seconds=timeout + MARGIN_S))

    async def decision(self, call: str, *, timeout: float) -> Decision:  # noqa: ASYNC109
        return wire.decision(await self._request(
            "GET", _call_path(call), params=_wait_params(timeout, peek=True),
            seconds=timeout + MARGIN_S))

    async def report(self, call: str, *, output: Any = None,
                     error: str | None = None) -> Observation:
        return wire.observation(await self._request(
            "POST", _call_path(call, "/result"), json={"output": output, "error": error}))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


class Client(_Base):
    """A Guard over a hookgate server (synchronous)."""

    def __init__(self, base_url: str, token: str, *, framework: str, timeout: float = 30.0,
                 http: httpx.Client | None = None, acts_for: str | None = None) -> None:
        super().__init__(base_url, token, framework=framework, timeout=timeout,
                         acts_for=acts_for)
        self._http = http or httpx.Client(timeout=timeout, verify=client_context())

    def _request(self, method: str, path: str, *, json: Any = None,
                 params: Mapping[str, Any] | None = None,
                 timeout: float | None = None) -> Mapping[str, Any]:
        content = _encoded(json) if json is not None else None
        try:
            response = self._http.request(
                method, self.base_url + path, content=content, params=params,
                headers=self.headers if content is None else self._json_headers,
                follow_redirects=False,
                timeout=timeout if timeout is not None else self.timeout)
        except httpx.HTTPError as exc:
            raise _unreachable(self.base_url, exc) from exc
        return _answer(response)

    def start_session(self, *, agent: str, session_id: str,
                      parent_session: str | None = None,
                      acts_for: str | None = None,
                      request: str | None = None) -> SessionStarted:
        return wire.session(self._request("POST", "/api/v1/sessions", json={
            "agent": agent, "session_id": session_id, "parent_session": parent_session,
            **_request(request), **_acting(acts_for or self.acts_for)}))

    def before_call(self, *, agent: str, session_id: str, call_id: str, tool: str,
                    arguments: Mapping[str, Any], description: str | None = None,
                    parameters: Mapping[str, Any] | None = None,
                    parent_session: str | None = None,
                    acts_for: str | None = None) -> Verdict:
        return wire.verdict(self._request("POST", "/api/v1/calls", json=_call_body(
            agent, session_id, call_id, tool, arguments, description, parameters,
            parent_session, acts_for or self.acts_for)))

    def wait(self, call: str, *, timeout: float) -> Verdict:
        return wire.verdict(self._request("GET", _call_path(call),
                                          params=_wait_params(timeout),
                                          timeout=timeout + MARGIN_S))

    def decision(self, call: str, *, timeout: float) -> Decision:
        return wire.decision(self._request("GET", _call_path(call),
                                           params=_wait_params(timeout, peek=True),
                                           timeout=timeout + MARGIN_S))

    def report(self, call: str, *, output: Any = None, error: str | None = None) -> Observation:
        return wire.observation(self._request(
            "POST", _call_path(call, "/result"), json={"output": output, "error": error}))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
