"""Reading WeCom's callback XML safely, and the card-click event inside it.

The outer XML is parsed before its signature can be checked, so anything with a DTD
(``<!DOCTYPE``/``<!ENTITY``, the entity-expansion attacks) is refused outright and the size
is bounded; only a flat ``<xml>`` of simple elements is read.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

MAX_XML_BYTES = 64 * 1024
FORBIDDEN_MARKUP = (b"<!DOCTYPE", b"<!ENTITY")


class UnsafeXml(ValueError):
    """The XML is too large, declares a DTD or is not well-formed."""


def flat_fields(data: bytes) -> dict[str, str]:
    """The text of each direct child of the root element, by tag."""
    if len(data) > MAX_XML_BYTES:
        raise UnsafeXml(f"XML larger than {MAX_XML_BYTES} bytes")
    upper = data.upper()
    if any(marker in upper for marker in FORBIDDEN_MARKUP):
        raise UnsafeXml("XML with a DOCTYPE or ENTITY declaration")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise UnsafeXml(f"malformed XML: {exc}") from None
    return {child.tag: (child.text or "").strip() for child in root}


@dataclass(frozen=True, slots=True)
class CardClick:
    """A ``template_card_event``: someone pressed a button of a template card."""

    from_user: str
    create_time: str
    event_key: str
    task_id: str
    response_code: str

    @property
    def dedupe_key(self) -> str:
        return f"{self.from_user}:{self.create_time}:{self.task_id}:{self.event_key}"


def card_click(fields: dict[str, str]) -> CardClick | None:
    """The click in a decrypted event, or None for any other message or event."""
    if fields.get("MsgType") != "event" or fields.get("Event") != "template_card_event":
        return None
    return CardClick(
        from_user=fields.get("FromUserName", ""),
        create_time=fields.get("CreateTime", ""),
        event_key=fields.get("EventKey", ""),
        task_id=fields.get("TaskId", ""),
        response_code=fields.get("ResponseCode", ""),
    )
