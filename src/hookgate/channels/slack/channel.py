"""SlackChannel: approval messages with Approve/Reject buttons in one Slack channel.

Messages go out with ``chat.postMessage`` and are rewritten with ``chat.update`` after the
decision. Clicks arrive at the interactivity URL as signed ``block_actions`` payloads and
are acknowledged with an empty 200; the card is updated through the API, not the reply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

import httpx

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
from hookgate.channels.delivery import PlatformSender, json_body
from hookgate.channels.payloads import json_object, member, string
from hookgate.channels.slack import signing
from hookgate.channels.slack.blocks import (
    approval_blocks,
    approval_text,
    decided_blocks,
    decided_text,
)
from hookgate.channels.slack.config import SlackSettings
from hookgate.channels.verification import check_size

DECISIONS = ("approve", "reject")
BLOCK_PREFIX = "approval_"


class SlackChannel(Channel):
    type = "slack"

    def __init__(self, channel_id: str, org_id: str, config: dict[str, Any]) -> None:
        super().__init__(channel_id, org_id, config)
        self.settings = SlackSettings.from_config(config)
        self._sender = PlatformSender("slack", self.settings.base_url, policy=self.settings.retry)

    @staticmethod
    def validate_config(config: Mapping[str, Any]) -> None:
        SlackSettings.from_config(config)

    # -- sending ---------------------------------------------------------------------------

    async def _call(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        response: httpx.Response = await self._sender.request(
            "POST",
            method,
            json=body,
            headers={
                "Authorization": f"Bearer {self.settings.bot_token}",
                "Content-Type": "application/json; charset=utf-8",
            },
        )
        data = json_body(response)
        if data.get("ok") is not True:
            raise self._sender.refused("POST", method, response, f"error {data.get('error')!r}")
        return data

    async def send_card(self, card: ApprovalCard) -> DeliveredCard:
        blocks = approval_blocks(card, now=datetime.now(UTC), patterns=self.settings.mask_patterns)
        data = await self._call(
            "chat.postMessage",
            {"channel": self.settings.channel, "text": approval_text(card), "blocks": blocks},
        )
        channel, ts = data.get("channel"), data.get("ts")
        if not isinstance(channel, str) or not isinstance(ts, str):
            raise DeliveryError(
                "slack: chat.postMessage answered ok without channel and ts",
                platform="slack",
                endpoint="POST chat.postMessage",
                body=json.dumps(data)[:500],
            )
        return DeliveredCard(self.id, {"channel": channel, "ts": ts, "tool": card.tool_name})

    async def update_card(self, delivered: DeliveredCard, outcome: CardOutcome) -> None:
        channel, ts = string(delivered.ref, "channel"), string(delivered.ref, "ts")
        if channel is None or ts is None:
            raise DeliveryError(
                f"slack: cannot update the message of request {outcome.request_id}: "
                "its ref has no channel and ts",
                platform="slack",
            )
        tool_name = string(delivered.ref, "tool")
        await self._call(
            "chat.update",
            {
                "channel": channel,
                "ts": ts,
                "text": decided_text(outcome, tool_name),
                "blocks": decided_blocks(outcome, tool_name,
                                         patterns=self.settings.mask_patterns),
            },
        )

    async def notify(self, text: str) -> None:
        await self._call("chat.postMessage", {"channel": self.settings.channel, "text": text})

    async def aclose(self) -> None:
        await self._sender.aclose()

    # -- callbacks -------------------------------------------------------------------------

    def parse_callback(self, request: CallbackRequest, now: float) -> CallbackAction:
        check_size(request)
        if request.method.upper() != "POST":
            raise CallbackRejected(400, "slack interactivity requests are POSTs")
        signing.verify(self.settings.signing_secret, request.headers, request.body, now)
        payload = _payload(request.body)
        if payload.get("type") != "block_actions":
            return CallbackAction(kind="ignored")
        user_id = string(member(payload, "user"), "id")
        if user_id is None:
            raise CallbackRejected(400, "block_actions without user.id")
        actions = payload.get("actions")
        click = next(
            (
                a
                for a in (actions if isinstance(actions, list) else [])
                if isinstance(a, dict)
                and str(a.get("block_id", "")).startswith(BLOCK_PREFIX)
                and a.get("action_id") in DECISIONS
            ),
            None,
        )
        if click is None:
            return CallbackAction(kind="ignored")
        request_id = string(click, "value")
        if request_id is None:
            raise CallbackRejected(400, "approval button without a value")
        container = member(payload, "container")
        message_ts = string(container, "message_ts") or string(member(payload, "message"), "ts")
        return CallbackAction(
            kind="decision",
            request_id=request_id,
            decision=click["action_id"],
            platform_user_id=user_id,
            dedupe_key=f"{message_ts}:{click.get('action_ts')}:{user_id}",
            ref={"channel": string(container, "channel_id"), "ts": message_ts},
        )

    def reply(
        self,
        request: CallbackRequest,
        action: CallbackAction,
        *,
        outcome: CardOutcome | None,
        message: str,
    ) -> CallbackReply:
        # Slack only needs the acknowledgement; the message is rewritten by update_card.
        return CallbackReply.empty()


def _payload(body: bytes) -> dict[str, Any]:
    try:
        fields = parse_qs(body.decode("utf-8"), strict_parsing=True)
    except (UnicodeDecodeError, ValueError):
        raise CallbackRejected(400, "body is not a form") from None
    if "payload" not in fields:
        raise CallbackRejected(400, "form without a 'payload' field")
    return json_object(fields["payload"][0], 400, "payload")
