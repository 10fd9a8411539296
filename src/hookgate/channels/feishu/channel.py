"""FeishuChannel: approval cards in a Feishu/Lark group chat, decided by button clicks.

Cards go out with ``POST /open-apis/im/v1/messages`` (the request id as ``uuid``, so a
retried send posts one card) and are replaced after the decision with ``PATCH``. Clicks
arrive as ``card.action.trigger`` (schema 2.0) callbacks, usually encrypted and signed.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

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
from hookgate.channels.feishu import crypto
from hookgate.channels.feishu.cards import approval_card, decided_card
from hookgate.channels.feishu.config import FeishuSettings
from hookgate.channels.payloads import json_object, member, string
from hookgate.channels.tokens import AccessTokenCache
from hookgate.channels.verification import check_fresh, check_size, secrets_equal

TOKEN_PATH = "/open-apis/auth/v3/tenant_access_token/internal"
MESSAGES_PATH = "/open-apis/im/v1/messages"

#: Codes meaning "this tenant_access_token is invalid or expired" (lark-oapi's list).
TOKEN_INVALID_CODES = frozenset({99991663, 99991664, 99991665, 99991666, 99991668})
#: "request trigger frequency limit", sent by some older APIs with HTTP 400 instead of 429.
RATE_LIMIT_CODE = 99991400
#: Refresh the tenant token this long before Feishu says it expires (as lark-oapi does).
TOKEN_MARGIN_SECONDS = 600
#: Feishu's ``uuid`` de-dup key is at most 50 characters.
UUID_MAX_CHARS = 50

DECISIONS = ("approve", "reject")

SignatureState = Literal["valid", "invalid", "absent"]


def _rate_limited(response: httpx.Response) -> bool:
    return json_body(response).get("code") == RATE_LIMIT_CODE


def _token_rejected(response: httpx.Response) -> bool:
    return json_body(response).get("code") in TOKEN_INVALID_CODES


def _describe(response: httpx.Response) -> str:
    data = json_body(response)
    error = data.get("error")
    log_id = response.headers.get("x-tt-logid") or (
        error.get("log_id") if isinstance(error, dict) else None
    )
    text = f"code {data.get('code')}: {data.get('msg')}"
    return f"{text} (log id {log_id})" if log_id else text


def _dedupe_uuid(request_id: str) -> str:
    if len(request_id) <= UUID_MAX_CHARS:
        return request_id
    return hashlib.sha256(request_id.encode()).hexdigest()[:UUID_MAX_CHARS]


def _reply_json(body: Mapping[str, Any]) -> CallbackReply:
    return CallbackReply(body=json.dumps(body, ensure_ascii=False).encode())


class FeishuChannel(Channel):
    type = "feishu"

    def __init__(self, channel_id: str, org_id: str, config: dict[str, Any]) -> None:
        super().__init__(channel_id, org_id, config)
        self.settings = FeishuSettings.from_config(config)
        self._sender = PlatformSender(
            "feishu",
            self.settings.base_url,
            policy=self.settings.retry,
            rate_limited_body=_rate_limited,
        )
        self._tokens = AccessTokenCache(self._fetch_token, margin=TOKEN_MARGIN_SECONDS)

    @staticmethod
    def validate_config(config: Mapping[str, Any]) -> None:
        FeishuSettings.from_config(config)

    # -- sending ---------------------------------------------------------------------------

    async def _fetch_token(self) -> tuple[str, float]:
        body = {"app_id": self.settings.app_id, "app_secret": self.settings.app_secret}
        response = await self._sender.request("POST", TOKEN_PATH, json=body)
        data = json_body(response)
        token = data.get("tenant_access_token")
        if data.get("code") != 0 or not isinstance(token, str):
            raise self._sender.refused(
                "POST", TOKEN_PATH, response, f"no tenant_access_token: {_describe(response)}"
            )
        return token, float(data.get("expire", 0))

    async def _call(
        self, method: str, path: str, body: dict[str, Any], params: dict[str, str] | None = None
    ) -> dict[str, Any]:
        async def attempt(token: str) -> httpx.Response:
            return await self._sender.request(
                method,
                path,
                params=params,
                json=body,
                headers={
                    "Authorization": f"Bearer {token}",
                    "Content-Type": "application/json; charset=utf-8",
                },
            )

        response = await self._tokens.call(attempt, _token_rejected)
        data = json_body(response)
        if data.get("code") != 0:
            raise self._sender.refused(method, path, response, _describe(response))
        return data

    async def _post_message(self, msg_type: str, content: dict[str, Any], dedupe: str) -> str:
        body = {
            "receive_id": self.settings.chat_id,
            "msg_type": msg_type,
            "content": json.dumps(content, ensure_ascii=False, separators=(",", ":")),
            "uuid": dedupe,
        }
        params = {"receive_id_type": self.settings.receive_id_type}
        data = await self._call("POST", MESSAGES_PATH, body, params)
        message_id = (data.get("data") or {}).get("message_id")
        if not isinstance(message_id, str):
            raise DeliveryError(
                f"feishu: POST {MESSAGES_PATH} answered code 0 without data.message_id",
                platform="feishu",
                endpoint=f"POST {MESSAGES_PATH}",
                body=json.dumps(data)[:500],
            )
        return message_id

    async def send_card(self, card: ApprovalCard) -> DeliveredCard:
        content = approval_card(card, now=datetime.now(UTC), patterns=self.settings.mask_patterns)
        message_id = await self._post_message(
            "interactive", content, _dedupe_uuid(card.send_key)
        )
        return DeliveredCard(self.id, {"message_id": message_id, "tool": card.tool_name})

    async def update_card(self, delivered: DeliveredCard, outcome: CardOutcome) -> None:
        message_id = string(delivered.ref, "message_id")
        if message_id is None:
            raise DeliveryError(
                f"feishu: cannot update the card of request {outcome.request_id}: "
                "its ref has no message_id",
                platform="feishu",
            )
        card = decided_card(outcome, string(delivered.ref, "tool"),
                            patterns=self.settings.mask_patterns)
        content = json.dumps(card, ensure_ascii=False, separators=(",", ":"))
        await self._call("PATCH", f"{MESSAGES_PATH}/{message_id}", {"content": content})

    async def notify(self, text: str) -> None:
        # A fresh uuid per notice still makes the sender's own retries post it once.
        await self._post_message("text", {"text": text}, uuid.uuid4().hex)

    async def aclose(self) -> None:
        await self._sender.aclose()

    # -- callbacks -------------------------------------------------------------------------

    def parse_callback(self, request: CallbackRequest, now: float) -> CallbackAction:
        check_size(request)
        if request.method.upper() != "POST":
            raise CallbackRejected(400, "feishu callbacks are POST requests")
        outer = json_object(request.body, 400, "the body")
        signature = self._signature_state(request)
        payload = self._open(outer, signed=signature == "valid")
        if payload.get("type") == "url_verification":
            # Feishu does not sign the handshake; the verification token is its check.
            return self._url_verification(payload)
        timestamp = request.headers.get("x-lark-request-timestamp")
        if signature == "invalid":
            raise CallbackRejected(401, "X-Lark-Signature does not match")
        if signature == "absent" and self.settings.encrypt_key is not None:
            raise CallbackRejected(401, "callback without X-Lark-Signature")
        if signature == "valid" or timestamp is not None:
            # Unsigned (allow_unsigned) timestamps prove nothing, but a stale one still tells.
            check_fresh(timestamp, now, source="X-Lark-Request-Timestamp")
        return self._event(payload)

    def _signature_state(self, request: CallbackRequest) -> SignatureState:
        """``valid``, ``invalid`` or ``absent`` (no header, or no encrypt_key to check it)."""
        key = self.settings.encrypt_key
        given = request.headers.get("x-lark-signature")
        if key is None or given is None:
            return "absent"
        timestamp = request.headers.get("x-lark-request-timestamp", "")
        nonce = request.headers.get("x-lark-request-nonce", "")
        expected = crypto.signature(timestamp, nonce, key, request.body)
        return "valid" if secrets_equal(given, expected) else "invalid"

    def _open(self, outer: dict[str, Any], *, signed: bool) -> dict[str, Any]:
        """The event inside the body, decrypted when it is an ``{"encrypt": ...}`` envelope."""
        encrypted = outer.get("encrypt")
        if encrypted is None:
            return outer
        key = self.settings.encrypt_key
        if key is None:
            raise CallbackRejected(400, "encrypted callback, but this channel has no encrypt_key")
        # Unsigned bodies get 401 whatever goes wrong, so nobody learns from our answers
        # whether a forged ciphertext padded correctly (a padding oracle).
        status = 400 if signed else 401
        if not isinstance(encrypted, str):
            raise CallbackRejected(status, "'encrypt' is not a string")
        try:
            plaintext = crypto.decrypt(encrypted, key)
        except crypto.FeishuCryptoError as exc:
            raise CallbackRejected(status, f"cannot decrypt the callback: {exc}") from None
        return json_object(plaintext, status, "the decrypted callback")

    def _url_verification(self, payload: dict[str, Any]) -> CallbackAction:
        if not secrets_equal(string(payload, "token"), self.settings.verification_token):
            raise CallbackRejected(401, "url_verification with a wrong verification token")
        challenge = string(payload, "challenge")
        if challenge is None:
            raise CallbackRejected(400, "url_verification without a challenge")
        return CallbackAction(
            kind="handshake",
            handshake_reply=json.dumps({"challenge": challenge}).encode(),
            handshake_content_type="application/json",
        )

    def _event(self, payload: dict[str, Any]) -> CallbackAction:
        if payload.get("schema") != "2.0":
            raise CallbackRejected(
                400,
                "not a schema 2.0 callback (legacy card request URLs are not supported; "
                "use Events & Callbacks → Callback configuration)",
            )
        header = member(payload, "header")
        if not secrets_equal(string(header, "token"), self.settings.verification_token):
            raise CallbackRejected(401, "callback with a wrong verification token")
        event_id = string(header, "event_id")
        if event_id is None:
            raise CallbackRejected(400, "callback without header.event_id")
        if header.get("event_type") != "card.action.trigger":
            return CallbackAction(kind="ignored", dedupe_key=event_id)
        return self._click(member(payload, "event"), event_id)

    def _click(self, event: dict[str, Any], event_id: str) -> CallbackAction:
        value = member(event, "action").get("value")
        if isinstance(value, str):
            value = json_object(value, 400, "action.value")
        if not isinstance(value, dict):
            raise CallbackRejected(400, "action.value is not an object")
        request_id, decision = string(value, "req"), value.get("decision")
        if request_id is None or decision not in DECISIONS:
            raise CallbackRejected(400, "action.value is not an approval button's value")
        open_id = string(member(event, "operator"), "open_id")
        if open_id is None:
            raise CallbackRejected(400, "click without operator.open_id")
        ref: dict[str, Any] = {"message_id": string(member(event, "context"), "open_message_id")}
        tool = string(value, "tool")
        if tool is not None:
            ref["tool"] = tool
        return CallbackAction(
            kind="decision",
            request_id=request_id,
            decision=decision,
            platform_user_id=open_id,
            dedupe_key=event_id,
            ref=ref,
        )

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
        if action.kind == "ignored":
            return _reply_json({})
        if outcome is None:
            return _reply_json({"toast": {"type": "warning", "content": message}})
        toast_type = "success" if outcome.status in ("approved", "rejected") else "info"
        card = decided_card(outcome, string(action.ref, "tool"),
                            patterns=self.settings.mask_patterns)
        return _reply_json(
            {"toast": {"type": toast_type, "content": message},
             "card": {"type": "raw", "data": card}}
        )
