"""TelegramChannel: approval messages with Approve/Reject inline buttons in one chat.

Messages go out with the Bot API's ``sendMessage`` and are rewritten with
``editMessageText`` (no buttons left) after the decision, wherever it was made. A click
arrives at the webhook as an Update holding a ``callback_query``; the webhook's secret token
proves it is Telegram's, the button's callback_data names the request (callback_data.py), and
the webhook's answer is the ``answerCallbackQuery`` call that shows the clicker the result.
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
from hookgate.channels.payloads import json_object, member, string
from hookgate.channels.telegram import callback_data
from hookgate.channels.telegram.config import TelegramSettings
from hookgate.channels.telegram.messages import (
    ANSWER_CHARS,
    NO_BUTTONS,
    approval_text,
    decided_text,
    keyboard,
)
from hookgate.channels.verification import check_size, secrets_equal

SECRET_HEADER = "x-telegram-bot-api-secret-token"
#: editMessageText's answer when the message already reads so (an update sent twice).
NOT_MODIFIED = "message is not modified"


class TelegramChannel(Channel):
    type = "telegram"

    def __init__(self, channel_id: str, org_id: str, config: dict[str, Any]) -> None:
        super().__init__(channel_id, org_id, config)
        self.settings = TelegramSettings.from_config(config)
        # The token is part of every method's URL; the sender names methods without it.
        self._sender = PlatformSender(
            "telegram", f"{self.settings.base_url}/bot{self.settings.bot_token}/",
            policy=self.settings.retry)

    @staticmethod
    def validate_config(config: Mapping[str, Any]) -> None:
        TelegramSettings.from_config(config)

    # -- sending ---------------------------------------------------------------------------

    async def _call(self, method: str, body: dict[str, Any]) -> Any:
        """The ``result`` of a Bot API call; DeliveryError when it is not ``ok``."""
        response: httpx.Response = await self._sender.request(
            "POST", method, json=body,
            headers={"Content-Type": "application/json; charset=utf-8"})
        data = json_body(response)
        if data.get("ok") is not True:
            raise self._sender.refused("POST", method, response,
                                       f"{data.get('description')!r}")
        return data.get("result")

    async def send_card(self, card: ApprovalCard) -> DeliveredCard:
        try:
            buttons = keyboard(*(callback_data.encode(self.settings.secret_token, self.id,
                                                      card.request_id, decision)
                                 for decision in ("approve", "reject")))
        except callback_data.CallbackDataTooLong as exc:
            raise DeliveryError(str(exc), platform="telegram") from None
        text = approval_text(card, now=datetime.now(UTC), patterns=self.settings.mask_patterns)
        result = await self._call("sendMessage", {"chat_id": self.settings.chat_id,
                                                  "text": text, "reply_markup": buttons})
        message = result if isinstance(result, dict) else {}
        message_id, chat_id = message.get("message_id"), member(message, "chat").get("id")
        if not isinstance(message_id, int) or not isinstance(chat_id, int | str):
            raise DeliveryError("telegram: sendMessage answered ok without the message's "
                                "message_id and chat.id", platform="telegram",
                                endpoint="POST sendMessage", body=json.dumps(result)[:500])
        return DeliveredCard(self.id, {"chat_id": chat_id, "message_id": message_id,
                                       "tool": card.tool_name})

    async def update_card(self, delivered: DeliveredCard, outcome: CardOutcome) -> None:
        chat_id, message_id = delivered.ref.get("chat_id"), delivered.ref.get("message_id")
        if not isinstance(message_id, int) or not isinstance(chat_id, int | str):
            raise DeliveryError(f"telegram: cannot update the message of request "
                                f"{outcome.request_id}: its ref has no chat_id and message_id",
                                platform="telegram")
        text = decided_text(outcome, string(delivered.ref, "tool"),
                            patterns=self.settings.mask_patterns)
        try:
            await self._call("editMessageText", {"chat_id": chat_id, "message_id": message_id,
                                                 "text": text, "reply_markup": NO_BUTTONS})
        except DeliveryError as exc:
            if exc.status == 400 and NOT_MODIFIED in (exc.body or ""):
                return  # it already shows this outcome
            raise

    async def notify(self, text: str) -> None:
        await self._call("sendMessage", {"chat_id": self.settings.chat_id,
                                         "text": clip(text, 4096)})

    async def aclose(self) -> None:
        await self._sender.aclose()

    # -- callbacks -------------------------------------------------------------------------

    def parse_callback(self, request: CallbackRequest, now: float) -> CallbackAction:
        check_size(request)
        if request.method.upper() != "POST":
            raise CallbackRejected(400, "telegram webhook updates are POSTs")
        given = request.headers.get(SECRET_HEADER)
        if not given:
            raise CallbackRejected(401, "update without X-Telegram-Bot-Api-Secret-Token")
        if not secrets_equal(given, self.settings.secret_token):
            raise CallbackRejected(401, "X-Telegram-Bot-Api-Secret-Token does not match")
        update = json_object(request.body, 400, "update")
        query = member(update, "callback_query")
        data = string(query, "data")
        if not query or data is None:
            return CallbackAction(kind="ignored")  # a message, a game button, ...
        request_id, decision = callback_data.decode(self.settings.secret_token, self.id, data)
        query_id = string(query, "id")
        user_id = member(query, "from").get("id")
        if query_id is None or not isinstance(user_id, int) or isinstance(user_id, bool):
            raise CallbackRejected(400, "callback_query without id and from.id")
        message = member(query, "message")
        return CallbackAction(
            kind="decision",
            request_id=request_id,
            decision="approve" if decision == "approve" else "reject",
            platform_user_id=str(user_id),
            # Telegram gives each callback query its own id; a second one is a replay.
            dedupe_key=f"callback_query:{query_id}",
            ref={"callback_query_id": query_id, "message_id": message.get("message_id"),
                 "chat_id": member(message, "chat").get("id")},
        )

    def reply(
        self,
        request: CallbackRequest,
        action: CallbackAction,
        *,
        outcome: CardOutcome | None,
        message: str,
    ) -> CallbackReply:
        """The webhook's answer calls answerCallbackQuery (a Bot API call made by replying
        to the webhook): the clicker sees ``message``; the message itself is rewritten by
        update_card once the request is decided."""
        query_id = action.ref.get("callback_query_id")
        if action.kind != "decision" or not isinstance(query_id, str):
            return CallbackReply.empty()
        body = {"method": "answerCallbackQuery", "callback_query_id": query_id,
                "text": clip(message, ANSWER_CHARS), "show_alert": outcome is None}
        return CallbackReply(body=json.dumps(body).encode())
