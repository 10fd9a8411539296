"""One HTTP client for tests that call servers on 127.0.0.1 over and over (waiting for a start,
polling a run's state): ``httpx.get()`` builds a new client per call, and with it an SSL
context (see hookgate.tls), where one client serves them all."""

from __future__ import annotations

import httpx

from hookgate.tls import client_context

#: The process's one TLS context (a new client's own would read the CA bundle again).
SSL_CONTEXT = client_context()

#: Every request on a connection of its own, as ``httpx.get()`` makes it (no keep-alive: a
#: server a test kills, pauses or restarts on the same port leaves no stale connection
#: behind), and no cap on connections at once; safe to share between threads.
HTTP = httpx.Client(timeout=10, verify=SSL_CONTEXT,
                    limits=httpx.Limits(max_connections=None, max_keepalive_connections=0))
