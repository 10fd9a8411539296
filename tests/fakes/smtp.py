"""A real SMTP server on loopback (aiosmtpd) that keeps every mail it receives."""

from __future__ import annotations

import email
import email.policy
import threading
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

from tests.live_server import free_port


class Inbox:
    """The aiosmtpd handler: parses and keeps each delivered mail, per recipient."""

    def __init__(self) -> None:
        self.mails: list[EmailMessage] = []
        self._arrived = threading.Condition()

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        content = envelope.original_content or b""
        message = email.message_from_bytes(content, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        with self._arrived:
            self.mails.append(message)
            self._arrived.notify_all()
        return "250 Message accepted for delivery"

    def to(self, address: str) -> list[EmailMessage]:
        return [m for m in self.mails if m["To"] == address]

    def wait(self, ready: Any, what: str, timeout: float = 15.0) -> Any:
        with self._arrived:
            if not self._arrived.wait_for(ready, timeout):
                raise AssertionError(f"no mail: {what}")
            return ready()


class SmtpServer:
    """``with SmtpServer() as smtp:`` — an SMTP server on 127.0.0.1 (no TLS, no auth)."""

    def __init__(self) -> None:
        self.inbox = Inbox()
        self.port = free_port()
        self._controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port)

    def __enter__(self) -> SmtpServer:
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()


def body(message: EmailMessage) -> str:
    part = message.get_body(("plain",))
    assert part is not None
    return str(part.get_content()).replace("\r\n", "\n")  # type: ignore[attr-defined]
