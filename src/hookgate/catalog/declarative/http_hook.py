"""HTTP hooks: the hook input is POSTed as JSON to a URL; a 2xx response carries the answer.

An empty 2xx body allows; a 2xx JSON body answers (protocol.py). Any other status, a body
that is not a JSON object, or no response in time is a failure under the hook's fail mode.
Redirects are not followed: a hook endpoint answers where it was declared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx

from hookgate.catalog.declarative.protocol import HookProtocolError, HookReply, reply_from_text
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookPoint
from hookgate.telemetry.propagation import with_trace_headers
from hookgate.tls import client_context

#: Keys an http hook entry takes besides the common ones.
KEYS = frozenset({"url", "headers"})


@dataclass(frozen=True, slots=True)
class HttpEndpoint:
    """POSTs to ``url`` with ``headers``.

    The hook's ``timeout`` (enforced by the registry around the whole exchange) is the one
    bound; httpx's own timeouts are off so they cannot cut in earlier.
    """

    kind: ClassVar[str] = "http"
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None

    @classmethod
    def from_declaration(cls, entry: Mapping[str, Any]) -> HttpEndpoint:
        url = entry.get("url")
        if not isinstance(url, str) or not url.strip():
            raise HookBuildError("an http hook needs 'url', a non-empty string")
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise HookBuildError(f"'url' {url!r} is not a valid URL: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise HookBuildError(f"'url' {url!r} must be an http:// or https:// URL with a host")
        headers = entry.get("headers") or {}
        if not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise HookBuildError("'headers' must map header names to string values")
        return cls(url, dict(headers))

    async def ask(self, payload: dict[str, Any], point: HookPoint) -> HookReply:
        async with httpx.AsyncClient(timeout=None, follow_redirects=False,
                                     verify=client_context()) as client:
            response = await client.post(self.url, json=payload,
                                         headers=with_trace_headers(self.headers))
        if not response.is_success:
            body = response.text.strip()
            detail = f": {body[:200]}" if body else ""
            raise HookProtocolError(
                f"POST {self.url} answered {response.status_code} "
                f"{response.reason_phrase}{detail}"
            )
        return reply_from_text(response.text, point)

    def describe(self) -> str:
        return f"url={self.url!r}"
