"""WeComChannel: approval cards as WeCom app messages to chosen users, decided by a click.

Cards are ``template_card`` button_interaction messages (``/cgi-bin/message/send``);
after the decision ``update_template_card`` greys the buttons out with "Approved by X",
using the single-use ``response_code`` the send returned. Callbacks are the encrypted
WXBizMsgCrypt protocol: a GET echostr handshake and POSTed ``template_card_event`` XML.

The click itself is answered with an empty 200 (no passive reply), so the one
``update_template_card`` call updates every recipient's card the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx

from hookgate.channels import card_text
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
from hookgate.channels.payloads import string
from hookgate.channels.tokens import AccessTokenCache
from hookgate.channels.verification import check_fresh, check_size, secrets_equal
from hookgate.channels.wecom import crypto
from hookgate.channels.wecom.cards import approval_card, parse_button_key
from hookgate.channels.wecom.config import WeComSettings
from hookgate.channels.wecom.events import UnsafeXml, card_click, flat_fields

TOKEN_PATH = "/cgi-bin/gettoken"
SEND_PATH = "/cgi-bin/message/send"
UPDATE_PATH = "/cgi-bin/message/update_template_card"

#: invalid access_token, access_token expired
TOKEN_INVALID_CODES = frozenset({40014, 42001})
#: api freq out of limit, system busy
RATE_LIMIT_CODES = frozenset({45009, -1})
#: "taskid has existed": this request's card was already sent (a retried send).
TASK_ID_EXISTS = 42014
TOKEN_MARGIN_SECONDS = 300


def _errcode(response: httpx.Response) -> Any:
    return json_body(response).get("errcode")


def _describe(response: httpx.Response) -> str:
    data = json_body(response)
    return f"errcode {data.get('errcode')}: {data.get('errmsg')}"


class WeComChannel(Channel):
    type = "wecom"

    def __init__(self, channel_id: str, org_id: str, config: dict[str, Any]) -> None:
        super().__init__(channel_id, org_id, config)
        self.settings = WeComSettings.from_config(config)
        self._crypto = crypto.WeComCrypto(self.settings.encoding_aes_key, self.settings.corp_id)
        self._sender = PlatformSender(
            "wecom",
            self.settings.base_url,
            policy=self.settings.retry,
            rate_limited_body=lambda r: _errcode(r) in RATE_LIMIT_CODES,
        )
        self._tokens = AccessTokenCache(self._fetch_token, margin=TOKEN_MARGIN_SECONDS)

    @staticmethod
    def validate_config(config: Mapping[str, Any]) -> None:
        WeComSettings.from_config(config)

    # -- sending ---------------------------------------------------------------------------

    async def _fetch_token(self) -> tuple[str, float]:
        response = await self._sender.request(
            "GET",
            TOKEN_PATH,
            params={"corpid": self.settings.corp_id, "corpsecret": self.settings.corp_secret},
        )
        data = json_body(response)
        token = data.get("access_token")
        if data.get("errcode") != 0 or not isinstance(token, str):
            raise self._sender.refused(
                "GET", TOKEN_PATH, response, f"no access_token: {_describe(response)}"
            )
        return token, float(data.get("expires_in", 0))

    async def _post(
        self, path: str, body: dict[str, Any], *, accept: frozenset[int] = frozenset()
    ) -> dict[str, Any]:
        async def attempt(token: str) -> httpx.Response:
            return await self._sender.request(
                "POST", path, params={"access_token": token}, json=body
            )

        response = await self._tokens.call(
            attempt, lambda r: _errcode(r) in TOKEN_INVALID_CODES
        )
        data = json_body(response)
        if data.get("errcode") != 0 and data.get("errcode") not in accept:
            raise self._sender.refused("POST", path, response, _describe(response))
        return data

    async def send_card(self, card: ApprovalCard) -> DeliveredCard:
        template = approval_card(card, now=datetime.now(UTC), patterns=self.settings.mask_patterns)
        body = {
            "touser": self.settings.touser,
            "msgtype": "template_card",
            "agentid": self.settings.agent_id,
            "template_card": template,
            "enable_duplicate_check": 0,
        }
        data = await self._post(SEND_PATH, body, accept=frozenset({TASK_ID_EXISTS}))
        # On TASK_ID_EXISTS the card is out there, but its response_code was in the answer
        # that got lost; the card then cannot be updated through the API.
        return DeliveredCard(
            self.id,
            {
                "task_id": template["task_id"],
                "response_code": string(data, "response_code"),
                "msgid": string(data, "msgid"),
            },
        )

    async def update_card(self, delivered: DeliveredCard, outcome: CardOutcome) -> None:
        response_code = string(delivered.ref, "response_code")
        if response_code is None:
            raise DeliveryError(
                f"wecom: cannot update the card of request {outcome.request_id}: no "
                "response_code (the send's answer was lost, or the code was already used)",
                platform="wecom",
            )
        body: dict[str, Any] = {
            "agentid": self.settings.agent_id,
            "response_code": response_code,
            "button": {"replace_name": card_text.button_label(outcome)},
        }
        if self.settings.touser == "@all":
            body["atall"] = 1
        else:
            body["userids"] = self.settings.touser.split("|")
        await self._post(UPDATE_PATH, body)
        # The disabled button has room for a few words only: edits and the words to the
        # model follow as a message to the same people.
        details = card_text.decision_lines(outcome, text_chars=card_text.NOTICE_CHARS,
                                           patterns=self.settings.mask_patterns)
        if details:
            await self.notify("\n".join([f"{card_text.outcome_line(outcome)} "
                                         f"(request {outcome.request_id})", *details]))

    async def notify(self, text: str) -> None:
        await self._post(
            SEND_PATH,
            {
                "touser": self.settings.touser,
                "msgtype": "text",
                "agentid": self.settings.agent_id,
                "text": {"content": text},
            },
        )

    async def aclose(self) -> None:
        await self._sender.aclose()

    # -- callbacks -------------------------------------------------------------------------

    def parse_callback(self, request: CallbackRequest, now: float) -> CallbackAction:
        check_size(request)
        method = request.method.upper()
        if method == "GET":
            return self._handshake(request, now)
        if method != "POST":
            raise CallbackRejected(400, "wecom callbacks are GET (handshake) or POST")
        try:
            outer = flat_fields(request.body)
        except UnsafeXml as exc:
            raise CallbackRejected(400, f"callback body refused: {exc}") from None
        encrypted = outer.get("Encrypt")
        if not encrypted:
            raise CallbackRejected(400, "callback XML without Encrypt")
        message = self._open(request, encrypted, now)
        try:
            fields = flat_fields(message)
        except UnsafeXml as exc:
            raise CallbackRejected(400, f"decrypted callback refused: {exc}") from None
        click = card_click(fields)
        parsed = parse_button_key(click.event_key) if click else None
        if click is None or parsed is None:
            return CallbackAction(kind="ignored")
        if not click.from_user:
            raise CallbackRejected(400, "template_card_event without FromUserName")
        decision, request_id = parsed
        return CallbackAction(
            kind="decision",
            request_id=request_id,
            decision=decision,
            platform_user_id=click.from_user,
            dedupe_key=click.dedupe_key,
            ref={"task_id": click.task_id, "response_code": click.response_code or None},
        )

    def _handshake(self, request: CallbackRequest, now: float) -> CallbackAction:
        echostr = request.query.get("echostr")
        if not echostr:
            raise CallbackRejected(400, "URL verification without echostr")
        plaintext = self._open(request, echostr, now)
        return CallbackAction(
            kind="handshake",
            handshake_reply=plaintext,
            handshake_content_type="text/plain",
        )

    def _open(self, request: CallbackRequest, encrypted: str, now: float) -> bytes:
        """Check the query's signature and timestamp, then decrypt ``encrypted``."""
        query = request.query
        given = query.get("msg_signature")
        timestamp, nonce = query.get("timestamp", ""), query.get("nonce", "")
        if not given:
            raise CallbackRejected(401, "callback without msg_signature")
        expected = crypto.signature(self.settings.token, timestamp, nonce, encrypted)
        if not secrets_equal(given, expected):
            raise CallbackRejected(401, "msg_signature does not match")
        check_fresh(timestamp, now, source="the query's timestamp")
        try:
            return self._crypto.decrypt(encrypted)
        except crypto.ReceiveIdMismatch as exc:
            raise CallbackRejected(401, str(exc)) from None
        except crypto.WeComCryptoError as exc:
            raise CallbackRejected(400, f"cannot decrypt the callback: {exc}") from None

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
        # An empty body means "no passive reply"; the card is updated by update_card.
        return CallbackReply.empty()
