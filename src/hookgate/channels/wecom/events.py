"""Reading WeCom's callback XML safely, and the card-click event inside it.

The outer XML is parsed before its signature can be checked, so it is parsed with
defusedxml with every DTD refused (entity expansion such as billion laughs, external
entities and DTDs alike) and the size bounded; only a flat ``<xml>`` of simple elements is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.etree.ElementTree import ParseError

import defusedxml
import defusedxml.ElementTree as SafeET

MAX_XML_BYTES = 64 * 1024


class UnsafeXml(ValueError):
    """The XML is too large, declares a DTD or entities, or is not well-formed."""


def flat_fields(data: bytes) -> dict[str, str]:
    """The text of each direct child of the root element, by tag."""
    if len(data) > MAX_XML_BYTES:
        raise UnsafeXml(f"XML larger than {MAX_XML_BYTES} bytes")
    try:
        root = SafeET.fromstring(data, forbid_dtd=True)
    except defusedxml.DTDForbidden:
        raise UnsafeXml("XML with a DOCTYPE declaration (DTDs are refused)") from None
    except defusedxml.EntitiesForbidden:
        raise UnsafeXml("XML with an ENTITY declaration (entities are refused)") from None
    except defusedxml.ExternalReferenceForbidden:
        raise UnsafeXml("XML that refers to an external resource (refused)") from None
    except defusedxml.DefusedXmlException as exc:
        raise UnsafeXml(f"XML refused: {exc}") from None
    except ParseError as exc:
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
