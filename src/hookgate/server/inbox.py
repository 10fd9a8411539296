"""Live inbox updates: every request this process creates or decides, per org."""

from __future__ import annotations

import asyncio

from hookgate.approvals.records import ConfirmationRequest


class InboxFeed:
    def __init__(self) -> None:
        self._subs: dict[str | None, set[asyncio.Queue[ConfirmationRequest]]] = {}

    def subscribe(self, org_id: str | None) -> asyncio.Queue[ConfirmationRequest]:
        q: asyncio.Queue[ConfirmationRequest] = asyncio.Queue(maxsize=1000)
        self._subs.setdefault(org_id, set()).add(q)
        return q

    def unsubscribe(self, org_id: str | None, q: asyncio.Queue[ConfirmationRequest]) -> None:
        self._subs.get(org_id, set()).discard(q)

    def publish(self, request: ConfirmationRequest) -> None:
        for q in self._subs.get(request.org_id, ()):
            if not q.full():
                q.put_nowait(request)
