"""EmailChannel: approval mails over SMTP (aiosmtplib) with a signed, single-use, expiring
link per decision and recipient.

A link's GET shows a confirmation page and decides nothing (mail scanners open every link);
only the page's POST decides, as the recipient the link was sent to. After the decision,
wherever it was made, each recipient gets a short mail saying who decided and how.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import make_msgid
from typing import Any
from urllib.parse import parse_qs

from hookgate.channels import signed_links
from hookgate.channels.base import (
    ApprovalCard,
    CallbackAction,
    CallbackRejected,
    CallbackReply,
    CallbackRequest,
    CardOutcome,
    Channel,
    DeliveredCard,
    DeliveryError,
)
from hookgate.channels.mail import pages
from hookgate.channels.mail.config import EmailSettings
from hookgate.channels.payloads import string
from hookgate.channels.verification import check_size

HTML = "text/html; charset=utf-8"


class EmailChannel(Channel):
    type = "email"

    def __init__(self, channel_id: str, org_id: str, config: dict[str, Any]) -> None:
        super().__init__(channel_id, org_id, config)
        self.settings = EmailSettings.from_config(config)
        self.callback_lifetime_s = float(self.settings.link_ttl_s)

    @staticmethod
    def validate_config(config: Mapping[str, Any]) -> None:
        EmailSettings.from_config(config)

    # -- sending ---------------------------------------------------------------------------

    async def _send(self, message: EmailMessage) -> None:
        import aiosmtplib

        s = self.settings
        try:
            await aiosmtplib.send(
                message, hostname=s.smtp_host, port=s.smtp_port, username=s.smtp_username,
                password=s.smtp_password, use_tls=s.use_tls,
                start_tls=s.starttls and not s.use_tls,
                timeout=s.retry.request_timeout)
        except (aiosmtplib.SMTPException, OSError) as exc:
            raise DeliveryError(f"email: sending to {message['To']} through "
                                f"{s.smtp_host}:{s.smtp_port} failed: {exc}",
                                platform="email", endpoint="SMTP") from None

    def _message(self, to: str, subject: str, body: str, *,
                 reply_to_id: str | None = None) -> EmailMessage:
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = (
            self.settings.from_address, to, subject)
        message["Message-ID"] = make_msgid(domain=self.settings.from_address.split("@")[-1])
        if reply_to_id:
            message["In-Reply-To"] = message["References"] = reply_to_id
        message.set_content(body)
        return message

    async def send_card(self, card: ApprovalCard) -> DeliveredCard:
        s = self.settings
        expires = int(time.time()) + s.link_ttl_s
        sent: dict[str, str] = {}
        for to in s.to:
            approve, reject = (pages.link(s.callback_url, signed_links.mint(
                s.link_secret, self.id, card.request_id, decision, to, expires))
                for decision in ("approve", "reject"))
            message = self._message(to, pages.approval_subject(card), pages.approval_body(
                card, now=datetime.now(UTC), patterns=s.mask_patterns,
                approve_url=approve, reject_url=reject))
            await self._send(message)
            sent[to] = str(message["Message-ID"])
        return DeliveredCard(self.id, {"message_ids": sent, "tool": card.tool_name})

    async def update_card(self, delivered: DeliveredCard, outcome: CardOutcome) -> None:
        sent = delivered.ref.get("message_ids")
        if not isinstance(sent, dict):
            raise DeliveryError(f"email: no recipients recorded for request "
                                f"{outcome.request_id}", platform="email")
        subject = pages.decided_subject(outcome, string(delivered.ref, "tool"))
        for to, message_id in sent.items():
            await self._send(self._message(str(to), subject, pages.decided_body(outcome),
                                           reply_to_id=str(message_id)))

    async def notify(self, text: str) -> None:
        for to in self.settings.to:
            await self._send(self._message(to, text.splitlines()[0][:120] if text else
                                           "hookgate", text))

    # -- callbacks -------------------------------------------------------------------------

    def parse_callback(self, request: CallbackRequest, now: float) -> CallbackAction:
        check_size(request)
        if request.method.upper() == "GET":
            token = request.query.get("t")
            claims = self._claims(token, now)
            return CallbackAction(kind="handshake", handshake_content_type=HTML,
                                  handshake_reply=pages.confirmation_page(claims, token or ""))
        if request.method.upper() != "POST":
            raise CallbackRejected(400, "email decisions are the confirmation page's POST")
        try:
            form = parse_qs(request.body.decode("utf-8"))
        except UnicodeDecodeError:
            raise CallbackRejected(400, "body is not a form") from None
        claims = self._claims((form.get("t") or [""])[0] or None, now)
        return CallbackAction(kind="decision", request_id=claims.request_id,
                              decision=claims.decision, platform_user_id=claims.recipient,
                              dedupe_key=f"link:{claims.nonce}")

    def _claims(self, token: str | None, now: float) -> signed_links.LinkClaims:
        """A token of this channel, unexpired, for one of its recipients (else 401)."""
        claims = signed_links.read(self.settings.link_secret, self.id, token, now)
        if claims.recipient not in self.settings.to:
            raise CallbackRejected(401, "the link's recipient is not one of 'to'")
        return claims

    def reply(
        self,
        request: CallbackRequest,
        action: CallbackAction,
        *,
        outcome: CardOutcome | None,
        message: str,
    ) -> CallbackReply:
        if action.kind == "handshake":
            return CallbackReply.handshake(action)
        return CallbackReply(body=pages.result_page(message or "Nothing to do"),
                             content_type=HTML)
