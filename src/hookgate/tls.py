"""The TLS context of hookgate's outgoing HTTPS clients: one per process, shared.

httpx builds a new SSL context for each client it makes, and building one reads the whole
CA bundle (``SSL_CERT_FILE``, or certifi's): about 25 ms of CPU, against well under a
millisecond for a request on an open connection. The clients hookgate makes per use (an
HTTP hook's call, an OpenID Connect exchange, a guarded-call client) share this context
instead (decision record 0024). It is built on first use with httpx's own defaults, so the
trust store is the one httpx would have used (``SSL_CERT_FILE``, ``SSL_CERT_DIR``, else
certifi), read as the process found it then.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl


@functools.cache
def client_context() -> ssl.SSLContext:
    """The shared context that verifies servers' certificates (httpx's ``verify=True``)."""
    import httpx

    return httpx.create_ssl_context()
