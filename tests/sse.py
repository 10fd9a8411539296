"""A small Server-Sent Events reader over httpx, for tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class SSEEvent:
    id: str | None
    event: str
    data: Any
    comment: bool = False


def read_events(response: httpx.Response) -> Iterator[SSEEvent]:
    """Yield events (and keep-alive comments) from a streaming response."""
    ev_id: str | None = None
    ev_type = "message"
    data: list[str] = []
    for line in response.iter_lines():
        if line == "":
            if data:
                raw = "\n".join(data)
                try:
                    payload: Any = json.loads(raw)
                except json.JSONDecodeError:
                    payload = raw
                yield SSEEvent(ev_id, ev_type, payload)
            ev_id, ev_type, data = None, "message", []
            continue
        if line.startswith(":"):
            yield SSEEvent(None, "", line[1:].strip(), comment=True)
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "id":
            ev_id = value
        elif field == "event":
            ev_type = value
        elif field == "data":
            data.append(value)
