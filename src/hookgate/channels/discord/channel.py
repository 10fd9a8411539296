"""DiscordChannel: approval messages with Approve/Reject buttons in one Discord channel.

Messages go out with ``POST /channels/{id}/messages`` (bot token) and are edited, buttons
removed, after the decision wherever it was made. Clicks arrive as HTTP interactions signed
with Ed25519; Discord wants an answer within 3 seconds, so a click is acknowledged at once
with a deferred update (type 6), decided after, and the clicker told the result in an
ephemeral follow-up through the interaction's webhook.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

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
from hookgate.channels.card_text import clip
from hookgate.channels.delivery import PlatformSender, json_body
from hookgate.channels.discord import signing
from hookgate.channels.discord.config import DiscordSettings
from hookgate.channels.discord.messages import (
    CONTENT_CHARS,
    NO_MENTIONS,
    approval_content,
    buttons,
    decided_content,
    parse_custom_id,
)
from hookgate.channels.payloads import json_object, member, string
from hookgate.channels.verification import check_size

PING, MESSAGE_COMPONENT = 1, 3
PONG, DEFERRED_UPDATE_MESSAGE = 1, 6
EPHEMERAL = 1 << 6


class DiscordChannel(Channel):
    type = "discord"
    defers_decisions = True

    def __init__(self, channel_id: str, org_id: str, config: dict[str, Any]) -> None:
        super().__init__(channel_id, org_id, config)
        self.settings = DiscordSettings.from_config(config)
        self._sender = PlatformSender("discord", self.settings.base_url + "/",
                                      policy=self.settings.retry)

    @staticmethod
    def validate_config(config: Mapping[str, Any]) -> None:
        DiscordSettings.from_config(config)

    # -- sending ---------------------------------------------------------------------------

    async def _call(self, method: str, path: str, body: dict[str, Any], *,
                    bot: bool = True) -> dict[str, Any]:
        headers = {"Authorization": f"Bot {self.settings.bot_token}"} if bot else {}
        response: httpx.Response = await self._sender.request(method, path, json=body,
                                                              headers=headers)
        if response.status_code not in (200, 201, 204):
            data = json_body(response)
            raise self._sender.refused(method, path.split("/")[0], response,
                                       f"{data.get('code')!r} {data.get('message')!r}")
        return json_body(response)

    async def send_card(self, card: ApprovalCard) -> DeliveredCard:
        content = approval_content(card, now=datetime.now(UTC),
                                   patterns=self.settings.mask_patterns)
        data = await self._call("POST", f"channels/{self.settings.channel_id}/messages", {
            "content": content, "components": buttons(card.request_id),
            "allowed_mentions": NO_MENTIONS})
        message_id = string(data, "id")
        if message_id is None:
            raise DeliveryError("discord: the message was taken without an id",
                                platform="discord", endpoint="POST channels/messages",
                                body=json.dumps(data)[:500])
        return DeliveredCard(self.id, {"channel": self.settings.channel_id,
                                       "message_id": message_id, "tool": card.tool_name})

    async def update_card(self, delivered: DeliveredCard, outcome: CardOutcome) -> None:
        channel, message_id = string(delivered.ref, "channel"), string(delivered.ref,
                                                                       "message_id")
        if channel is None or message_id is None:
            raise DeliveryError(f"discord: cannot update the message of request "
                                f"{outcome.request_id}: its ref has no channel and "
                                "message_id", platform="discord")
        content = decided_content(outcome, string(delivered.ref, "tool"),
                                  patterns=self.settings.mask_patterns)
        await self._call("PATCH", f"channels/{channel}/messages/{message_id}", {
            "content": content, "components": [], "allowed_mentions": NO_MENTIONS})

    async def notify(self, text: str) -> None:
        await self._call("POST", f"channels/{self.settings.channel_id}/messages", {
            "content": clip(text, CONTENT_CHARS), "allowed_mentions": NO_MENTIONS})

    async def deferred_result(self, action: CallbackAction, *, outcome: CardOutcome | None,
                              message: str) -> None:
        """An ephemeral follow-up only the clicker sees (the message itself is edited by
        update_card once the request is decided)."""
        token = action.ref.get("interaction_token")
        if not isinstance(token, str) or not message:
            return
        await self._call("POST", f"webhooks/{self.settings.application_id}/{token}", {
            "content": clip(message, CONTENT_CHARS), "flags": EPHEMERAL,
            "allowed_mentions": NO_MENTIONS}, bot=False)

    async def aclose(self) -> None:
        await self._sender.aclose()

    # -- callbacks -------------------------------------------------------------------------

    def parse_callback(self, request: CallbackRequest, now: float) -> CallbackAction:
        check_size(request)
        if request.method.upper() != "POST":
            raise CallbackRejected(400, "Discord interactions are POSTs")
        signing.verify(self.settings.public_key, request.headers, request.body, now)
        interaction = json_object(request.body, 400, "interaction")
        kind = interaction.get("type")
        if kind == PING:
            return CallbackAction(kind="handshake",
                                  handshake_reply=json.dumps({"type": PONG}).encode())
        if kind != MESSAGE_COMPONENT or string(interaction, "application_id") != \
                self.settings.application_id:
            return CallbackAction(kind="ignored")
        clicked = parse_custom_id(string(member(interaction, "data"), "custom_id") or "")
        if clicked is None:
            return CallbackAction(kind="ignored")
        user = member(member(interaction, "member"), "user") or member(interaction, "user")
        user_id, interaction_id = string(user, "id"), string(interaction, "id")
        token = string(interaction, "token")
        if user_id is None or interaction_id is None or token is None:
            raise CallbackRejected(400, "interaction without id, token and user id")
        decision, request_id = clicked
        return CallbackAction(
            kind="decision", request_id=request_id,
            decision="approve" if decision == "approve" else "reject",
            platform_user_id=user_id, dedupe_key=f"interaction:{interaction_id}",
            ref={"interaction_token": token,
                 "message_id": string(member(interaction, "message"), "id")})

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
        if action.kind == "decision":  # acknowledged now, decided after (defers_decisions)
            return CallbackReply(body=json.dumps({"type": DEFERRED_UPDATE_MESSAGE}).encode())
        return CallbackReply.empty()
