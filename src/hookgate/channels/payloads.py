"""Reading untrusted callback JSON: every shape problem becomes a CallbackRejected."""

from __future__ import annotations

import json
from typing import Any

from hookgate.channels.base import CallbackRejected


def json_object(raw: bytes | str, status: int, what: str) -> dict[str, Any]:
    """``raw`` parsed as a JSON object, or CallbackRejected(status) naming ``what``."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise CallbackRejected(status, f"{what} is not JSON") from None
    if not isinstance(data, dict):
        raise CallbackRejected(status, f"{what} is not a JSON object")
    return data


def member(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """``parent[key]`` when it is an object, else an empty one."""
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def string(parent: dict[str, Any], key: str) -> str | None:
    """``parent[key]`` when it is a non-empty string."""
    value = parent.get(key)
    return value if isinstance(value, str) and value else None
