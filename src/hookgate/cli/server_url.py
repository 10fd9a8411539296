"""The server's base URL as the CLI's ``--url`` takes it: ``http://host:port``, also when it
is given with the API's path (``…/api``, ``…/api/v1``) or a trailing slash."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

#: Paths of the server's API that people paste with its address; the base is what is left.
_API_PATHS = ("/api/v1", "/api")


class NotAServerUrl(ValueError):
    """``--url`` is not an http(s) address."""


def server_base(url: str) -> str:
    """``http://host:8000`` from ``http://host:8000``, ``…/``, ``…/api`` or ``…/api/v1``; a
    prefix before them (a reverse proxy's ``/hookgate``) is kept. Raises NotAServerUrl
    saying what to give."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise NotAServerUrl(
            f"--url must be the server's address, e.g. http://127.0.0.1:8000, not {url!r}")
    path = parts.path.rstrip("/")
    for api in _API_PATHS:
        if path.endswith(api):
            path = path[: -len(api)]
            break
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))
