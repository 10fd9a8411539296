"""The channel-delivery-failure counter: a send to a chat platform that failed for good."""

from __future__ import annotations

from hookgate.telemetry import names
from hookgate.telemetry.instruments import instruments
from hookgate.telemetry.switch import SWITCH


def delivery_failed(platform: str, status: int | None) -> None:
    """Count one delivery given up on (``status``: the last HTTP status, None if none came)."""
    if not SWITCH.on:
        return
    attrs: dict[str, str | int] = {names.CHANNEL_PLATFORM: platform}
    if status is not None:
        attrs[names.HTTP_STATUS] = status
    else:
        attrs[names.ERROR_TYPE] = "no_answer"
    instruments().delivery_failures.add(1, attrs)
