"""NtfyChannel: a push notification per approver's topic, with Approve/Reject buttons.

Each button is an ntfy ``http`` action: the phone POSTs a signed, single-use token valid for
``token_ttl_s`` straight to this channel's callback URL. The notification names the tool and
the agent, never the arguments (a lock screen is public); the inbox link shows them. After
the decision, wherever it was made, each topic gets a short notification of the outcome.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

import httpx

from hookgate.channels import card_text, signed_links
from hookgate.channels.base import (
    ApprovalCard,
    CallbackAction,
    CallbackRejected,
    CallbackReply,
    CallbackRequest,
    CardOutcome,
    Channel,
    DeliveredCard,
)
from hookgate.channels.delivery import PlatformSender, json_body
from hookgate.channels.ntfy.config import NtfySettings
from hookgate.channels.payloads import string
from hookgate.channels.verification import check_size

FORM = "application/x-www-form-urlencoded"
#: What ntfy takes as a sequence id (a message id it returned is one).
SEQUENCE_ID = re.compile(r"[-_A-Za-z0-9]{1,64}")


class NtfyChannel(Channel):
    type = "ntfy"

    def __init__(self, channel_id: str, org_id: str, config: dict[str, Any]) -> None:
        super().__init__(channel_id, org_id, config)
        self.settings = NtfySettings.from_config(config)
        self.callback_lifetime_s = float(self.settings.token_ttl_s)
        self._sender = PlatformSender("ntfy", self.settings.base_url,
                                      policy=self.settings.retry)

    @staticmethod
    def validate_config(config: Mapping[str, Any]) -> None:
        NtfySettings.from_config(config)

    async def _publish(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.settings.access_token:
            headers["Authorization"] = f"Bearer {self.settings.access_token}"
        response: httpx.Response = await self._sender.request("POST", "/", json=body,
                                                              headers=headers)
        if response.status_code != 200:
            raise self._sender.refused("POST", "/", response,
                                       f"{json_body(response).get('error')!r}")
        return json_body(response)

    def _button(self, label: str, token: str) -> dict[str, Any]:
        return {"action": "http", "label": label, "url": self.settings.callback_url,
                "method": "POST", "headers": {"Content-Type": FORM},
                "body": f"t={token}", "clear": True}

    async def send_card(self, card: ApprovalCard) -> DeliveredCard:
        s = self.settings
        expires = int(time.time()) + s.token_ttl_s
        ids: dict[str, str] = {}
        for topic in s.topics:
            approve, reject = (signed_links.mint(s.link_secret, self.id, card.request_id,
                                                 decision, topic, expires)
                               for decision in ("approve", "reject"))
            actions = [self._button("Approve", approve), self._button("Reject", reject)]
            if card.inbox_url:
                actions.append({"action": "view", "label": "Details", "url": card.inbox_url})
            # The tool and the agent only: a lock screen is no place for the arguments.
            data = await self._publish({
                "topic": topic, "title": card_text.clip(card_text.title(card), 120),
                "message": f"{card_text.summary(card)}. Time left: "
                           f"{card_text.remaining(card.expires_at, datetime.now(UTC))}.",
                "priority": 4, "tags": ["warning"], "actions": actions})
            ids[topic] = str(data.get("id", ""))
        return DeliveredCard(self.id, {"ids": ids, "tool": card.tool_name})

    async def update_card(self, delivered: DeliveredCard, outcome: CardOutcome) -> None:
        ids = delivered.ref.get("ids")
        topics = list(ids) if isinstance(ids, dict) else self.settings.topics
        tool = string(delivered.ref, "tool")
        status = card_text.STATUS_TITLES[outcome.status]
        for topic in topics:
            body: dict[str, Any] = {
                "topic": topic, "title": f"{status}: {tool}" if tool else status,
                "message": card_text.outcome_line(outcome),
                "tags": ["white_check_mark" if outcome.status == "approved" else "x"]}
            sequence = ids.get(topic) if isinstance(ids, dict) else None
            if isinstance(sequence, str) and SEQUENCE_ID.fullmatch(sequence):
                # The same sequence id replaces the notification, buttons and all.
                body["sequence_id"] = sequence
            await self._publish(body)

    async def notify(self, text: str) -> None:
        for topic in self.settings.topics:
            await self._publish({"topic": topic, "message": card_text.clip(text, 4000)})

    async def aclose(self) -> None:
        await self._sender.aclose()

    def parse_callback(self, request: CallbackRequest, now: float) -> CallbackAction:
        check_size(request)
        if request.method.upper() != "POST":
            raise CallbackRejected(400, "ntfy buttons POST their token")
        try:
            form = parse_qs(request.body.decode("utf-8"))
        except UnicodeDecodeError:
            raise CallbackRejected(400, "body is not a form") from None
        token = (form.get("t") or [""])[0] or None
        claims = signed_links.read(self.settings.link_secret, self.id, token, now)
        if claims.recipient not in self.settings.topics:
            raise CallbackRejected(401, "the token's topic is no longer one of 'topics'")
        return CallbackAction(kind="decision", request_id=claims.request_id,
                              decision=claims.decision, platform_user_id=claims.recipient,
                              dedupe_key=f"token:{claims.nonce}")

    def reply(
        self,
        request: CallbackRequest,
        action: CallbackAction,
        *,
        outcome: CardOutcome | None,
        message: str,
    ) -> CallbackReply:
        return CallbackReply(body=json.dumps({"result": message or "Nothing to do"}).encode())
