"""Live inbox updates, per org: the requests created or decided.

With one process (SQLite) the approval service's changes are published directly. With
several (PostgreSQL) every change is announced as a notification; each instance reads the
request and publishes it to its own subscribers, and wakes its in-memory waiters.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Coroutine
from typing import Any

from hookgate.approvals.persistent import PersistentApprovals
from hookgate.approvals.records import ConfirmationRequest
from hookgate.storage.database import Database
from hookgate.storage.transaction import Transaction

log = logging.getLogger(__name__)

#: NOTIFY channel for request changes; the payload is {"id": request id, "org": org id}.
REQUESTS_CHANNEL = "hookgate_requests"


def _payload(request: ConfirmationRequest) -> str:
    return json.dumps({"id": request.id, "org": request.org_id})


class InboxFeed:
    def __init__(self) -> None:
        self._subs: dict[str | None, set[asyncio.Queue[ConfirmationRequest]]] = {}

    def subscribe(self, org_id: str | None) -> asyncio.Queue[ConfirmationRequest]:
        q: asyncio.Queue[ConfirmationRequest] = asyncio.Queue(maxsize=1000)
        self._subs.setdefault(org_id, set()).add(q)
        return q

    def unsubscribe(self, org_id: str | None, q: asyncio.Queue[ConfirmationRequest]) -> None:
        self._subs.get(org_id, set()).discard(q)

    def watched(self, org_id: str | None) -> bool:
        return bool(self._subs.get(org_id))

    def publish(self, request: ConfirmationRequest) -> None:
        for q in self._subs.get(request.org_id, ()):
            if not q.full():
                q.put_nowait(request)


class RequestChanges:
    """Announces this process's request changes and receives every instance's."""

    def __init__(self, db: Database, approvals: PersistentApprovals, inbox: InboxFeed) -> None:
        self.db = db
        self.approvals = approvals
        self.inbox = inbox
        self._tasks: set[asyncio.Task[None]] = set()

    async def announce_within(self, tx: Transaction, request: ConfirmationRequest) -> None:
        """Announce ``request``'s change when ``tx``, the transaction making it, commits."""
        await self.db.notify(tx, REQUESTS_CHANNEL, _payload(request))

    def announce(self, request: ConfirmationRequest) -> None:
        """Announce a change made without `announce_within`, in a transaction of its own."""
        self._spawn(self._notify(_payload(request)))

    async def _notify(self, payload: str) -> None:
        try:
            async with self.db.transaction() as s:
                await self.db.notify(s, REQUESTS_CHANNEL, payload)
        except Exception:
            log.exception("announcing a request change failed")

    def received(self, payload: str | None) -> None:
        if payload is None:  # reconnected: the waiters re-read their requests
            return
        try:
            note = json.loads(payload)
            request_id, org_id = str(note["id"]), note.get("org")
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring a malformed request notification %r", payload[:200])
            return
        self.approvals.hub.wake(request_id)
        if self.inbox.watched(org_id):
            self._spawn(self._publish(request_id))

    async def _publish(self, request_id: str) -> None:
        request = await self.approvals.store.get(request_id)
        if request is not None:
            self.inbox.publish(request)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
