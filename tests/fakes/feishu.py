"""A fake Feishu/Lark Open Platform on loopback, strict about what the docs say.

It issues tenant_access_tokens (and can expire them to force the refresh path), accepts
interactive cards only as a JSON *string* holding a card JSON 2.0 (no 1.0 ``action``
module, unknown properties refused, buttons with callback behaviors), patches cards by
message id, and builds ``card.action.trigger`` / ``url_verification`` callbacks the way
Feishu sends them: plain or encrypted, signed, stale, forged or replayed::

    with FakeFeishu() as fake:
        channel = FeishuChannel("ch1", "org1", fake.channel_config())
        ...
        callback = fake.card_click("r1", "approve", open_id="ou_alice")
        action = channel.parse_callback(callback.request(), now=time.time())
"""

from __future__ import annotations

import itertools
import json
import re
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

from starlette.responses import JSONResponse, Response

from hookgate.channels.feishu import crypto
from tests.fakes.server import (
    BuiltCallback,
    FakePlatform,
    Handler,
    Received,
    ShapeViolation,
    json_of,
    require,
    require_keys,
)

TOKEN_PATH = "/open-apis/auth/v3/tenant_access_token/internal"
MESSAGES_PATH = "/open-apis/im/v1/messages"

HEADER_TEMPLATES = {"blue", "wathet", "turquoise", "green", "yellow", "orange", "red",
                    "carmine", "violet", "purple", "indigo", "grey", "default"}
BUTTON_TYPES = {"default", "primary", "danger", "text", "primary_text", "danger_text",
                "primary_filled", "danger_filled", "laser"}
ELEMENT_KEYS: dict[str, set[str]] = {
    "markdown": {"tag", "content", "element_id", "text_align", "text_size", "margin", "icon"},
    "div": {"tag", "text", "element_id", "margin", "icon", "fields"},
    "hr": {"tag", "element_id", "margin"},
    "column_set": {"tag", "columns", "element_id", "flex_mode", "horizontal_spacing",
                   "horizontal_align", "background_style", "margin"},
    "button": {"tag", "text", "type", "element_id", "behaviors", "confirm", "disabled",
               "disabled_tips", "width", "size", "icon", "hover_tips", "margin", "value"},
}
COLUMN_KEYS = {"tag", "elements", "width", "weight", "vertical_align", "element_id",
               "padding", "background_style", "vertical_spacing"}
CARD_MAX_BYTES = 30 * 1024


def check_card(card: Any) -> None:
    """Raise ShapeViolation unless ``card`` is a card JSON 2.0 Feishu would accept."""
    card = require_keys(card, {"schema", "config", "header", "body", "card_link"}, "card",
                        {"schema", "body"})
    require(card["schema"] == "2.0", "card.schema must be \"2.0\"")
    require(len(json.dumps(card, ensure_ascii=False).encode()) <= CARD_MAX_BYTES,
            "card larger than 30 KB")
    config = require_keys(card.get("config", {}),
                          {"update_multi", "width_mode", "streaming_mode", "summary"},
                          "card.config")
    require(config.get("update_multi", True) is True, "JSON 2.0 cards allow only update_multi true")
    if "header" in card:
        header = require_keys(card["header"], {"title", "subtitle", "template", "icon",
                                               "text_tag_list", "padding"}, "card.header",
                              {"title"})
        _check_text(header["title"], "card.header.title")
        if "subtitle" in header:
            _check_text(header["subtitle"], "card.header.subtitle")
        require(header.get("template", "default") in HEADER_TEMPLATES,
                f"unknown header template {header.get('template')!r}")
    body = require_keys(card["body"], {"elements", "direction", "padding",
                                       "horizontal_spacing", "vertical_spacing"},
                        "card.body", {"elements"})
    require(isinstance(body["elements"], list), "card.body.elements must be a list")
    for i, element in enumerate(body["elements"]):
        _check_element(element, f"body.elements[{i}]")


def _check_text(obj: Any, where: str) -> None:
    text = require_keys(obj, {"tag", "content", "text_size", "text_align", "text_color",
                              "lines", "i18n_content"}, where, {"tag", "content"})
    require(text["tag"] in ("plain_text", "lark_md"), f"{where}.tag must be plain_text/lark_md")
    require(isinstance(text["content"], str), f"{where}.content must be a string")


def _check_element(element: Any, where: str) -> None:
    require(isinstance(element, dict) and "tag" in element, f"{where} must have a tag")
    tag = element["tag"]
    require(tag != "action", f"{where}: the JSON 1.0 'action' module is not supported in 2.0")
    require(tag in ELEMENT_KEYS, f"{where}: unknown component {tag!r}")
    require_keys(element, ELEMENT_KEYS[tag], where)
    if "element_id" in element:
        require(re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,19}", element["element_id"]),
                f"{where}.element_id must start with a letter, at most 20 chars")
    if tag == "markdown":
        require(isinstance(element.get("content"), str), f"{where}.content must be a string")
    elif tag == "div":
        _check_text(element.get("text"), f"{where}.text")
    elif tag == "column_set":
        require(isinstance(element.get("columns"), list), f"{where}.columns must be a list")
        for j, column in enumerate(element["columns"]):
            column = require_keys(column, COLUMN_KEYS, f"{where}.columns[{j}]",
                                  {"tag", "elements"})
            require(column["tag"] == "column", f"{where}.columns[{j}] must be a column")
            for k, inner in enumerate(column["elements"]):
                _check_element(inner, f"{where}.columns[{j}].elements[{k}]")
    elif tag == "button":
        _check_text(element.get("text"), f"{where}.text")
        require(element.get("type", "default") in BUTTON_TYPES, f"{where}: unknown button type")
        behaviors = element.get("behaviors")
        require(isinstance(behaviors, list) and behaviors, f"{where} needs behaviors")
        for behavior in behaviors:
            require(isinstance(behavior, dict) and behavior.get("type") == "callback",
                    f"{where}: approval buttons need a callback behavior")
            value = behavior.get("value")
            require(isinstance(value, dict) and isinstance(value.get("req"), str)
                    and value.get("decision") in ("approve", "reject"),
                    f"{where}: callback value must carry req and decision")


def buttons_of(card: dict[str, Any]) -> list[dict[str, Any]]:
    """Every button anywhere in a card."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("tag") == "button":
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(card.get("body", {}))
    return found


def card_text(card: dict[str, Any]) -> str:
    """All the text a card shows, joined (for asserting what a person would read)."""
    parts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "content" and isinstance(value, str):
                    parts.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(card)
    return "\n".join(parts)


@dataclass
class FeishuMessage:
    message_id: str
    chat_id: str
    msg_type: str
    content: dict[str, Any]
    uuid: str | None
    patches: list[dict[str, Any]] = field(default_factory=list)


@dataclass(kw_only=True)
class FakeFeishu(FakePlatform):
    app_id: str = "cli_fake"
    app_secret: str = "fake-app-secret"
    chat_id: str = "oc_approvals"
    verification_token: str = "fake-verification-token"
    encrypt_key: str | None = "fake-encrypt-key"
    token_lifetime: int = 7200

    token_path: ClassVar[str] = TOKEN_PATH

    def __post_init__(self) -> None:
        super().__post_init__()
        self.messages: dict[str, FeishuMessage] = {}
        self._by_uuid: dict[str, str] = {}
        self._ids = itertools.count(1)

    def channel_config(self, **overrides: Any) -> dict[str, Any]:
        """A FeishuChannel config that points at this fake, with small retry delays."""
        config: dict[str, Any] = {
            "app_id": self.app_id,
            "app_secret": self.app_secret,
            "chat_id": self.chat_id,
            "verification_token": self.verification_token,
            "base_url": self.url,
            "retry": {"base_delay": 0.01, "max_delay": 0.05, "total_timeout": 5},
        }
        if self.encrypt_key is not None:
            config["encrypt_key"] = self.encrypt_key
        else:
            config["allow_unsigned"] = True
        config.update(overrides)
        return config

    # -- test controls ---------------------------------------------------------------------

    def cards(self) -> list[dict[str, Any]]:
        return [m.content for m in self.messages.values() if m.msg_type == "interactive"]

    def texts(self) -> list[str]:
        return [m.content["text"] for m in self.messages.values() if m.msg_type == "text"]

    # -- the API ---------------------------------------------------------------------------

    def routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("POST", re.escape(TOKEN_PATH), self._token),
            ("POST", re.escape(MESSAGES_PATH), self._send),
            ("PATCH", re.escape(MESSAGES_PATH) + r"/(?P<message_id>[^/]+)", self._patch),
        ]

    def violation_response(self, message: str) -> Response:
        return _error(400, 99992402, f"field validation failed: {message}")

    def _token(self, received: Received, match: re.Match[str]) -> Response:
        body = require_keys(json_of(received), {"app_id", "app_secret"}, "body",
                            {"app_id", "app_secret"})
        if body["app_id"] != self.app_id or body["app_secret"] != self.app_secret:
            return _error(400, 10014, "app secret invalid")
        now = time.time()
        live = [(t, exp) for t, exp in self.tokens.items() if exp - now >= 1800]
        if live:  # Feishu returns the same token while it has 30 min or more left
            token, expires_at = live[-1]
        else:
            token, expires_at = f"t-{secrets.token_hex(8)}", now + self.token_lifetime
            self.tokens[token] = expires_at
        return JSONResponse({"code": 0, "msg": "ok", "tenant_access_token": token,
                             "expire": int(expires_at - now)})

    def _authorize(self, received: Received) -> Response | None:
        auth = received.headers.get("authorization", "")
        require(auth.startswith("Bearer "), "missing 'Authorization: Bearer <token>'")
        if self.token_state(auth.removeprefix("Bearer ")) != "valid":
            return _error(400, 99991663, "Invalid access token for authorization")
        return None

    def _send(self, received: Received, match: re.Match[str]) -> Response:
        refused = self._authorize(received)
        if refused:
            return refused
        id_type = received.query.get("receive_id_type")
        require(id_type in ("open_id", "union_id", "user_id", "email", "chat_id"),
                f"receive_id_type {id_type!r} is not valid")
        body = require_keys(json_of(received), {"receive_id", "msg_type", "content", "uuid"},
                            "body", {"receive_id", "msg_type", "content"})
        require(body["receive_id"] == self.chat_id, f"unknown chat {body['receive_id']!r}")
        content = self._content(body, body["msg_type"])
        dedupe = body.get("uuid")
        require(dedupe is None or (isinstance(dedupe, str) and 0 < len(dedupe) <= 50),
                "uuid must be a string of at most 50 characters")
        if dedupe in self._by_uuid:
            message = self.messages[self._by_uuid[dedupe]]
        else:
            message = FeishuMessage(f"om_{next(self._ids)}", self.chat_id, body["msg_type"],
                                    content, dedupe)
            self.messages[message.message_id] = message
            if dedupe:
                self._by_uuid[dedupe] = message.message_id
        return _ok({"message_id": message.message_id, "chat_id": message.chat_id,
                    "msg_type": message.msg_type, "create_time": str(int(time.time() * 1000)),
                    "sender": {"id": self.app_id, "id_type": "app_id", "sender_type": "app"}})

    def _content(self, body: dict[str, Any], msg_type: str) -> dict[str, Any]:
        require(isinstance(body["content"], str), "content must be a JSON string, not an object")
        try:
            content = json.loads(body["content"])
        except ValueError:
            raise ShapeViolation("content is not valid JSON") from None
        if msg_type == "interactive":
            check_card(content)
        elif msg_type == "text":
            require_keys(content, {"text"}, "text content", {"text"})
        else:
            raise ShapeViolation(f"unexpected msg_type {msg_type!r}")
        return dict(content)

    def _patch(self, received: Received, match: re.Match[str]) -> Response:
        refused = self._authorize(received)
        if refused:
            return refused
        message = self.messages.get(match["message_id"])
        if message is None:
            return _error(400, 230001, "message not found")
        require(message.msg_type == "interactive", "only cards can be patched")
        body = require_keys(json_of(received), {"content"}, "body", {"content"})
        content = self._content(body, "interactive")
        message.patches.append(content)
        message.content = content
        return _ok({})

    # -- callbacks as Feishu sends them ----------------------------------------------------

    def card_click(
        self,
        request_id: str,
        decision: str,
        open_id: str = "ou_approver",
        *,
        encrypted: bool = True,
        timestamp: int | None = None,
        message_id: str | None = None,
        event_id: str | None = None,
        verification_token: str | None = None,
        signing_key: str | None = None,
        signed: bool = True,
        value_as_string: bool = False,
        value: dict[str, Any] | None = None,
        event_type: str = "card.action.trigger",
    ) -> BuiltCallback:
        """A click on an approval button of the last card (or ``message_id``).

        Forgeries: a wrong ``verification_token``, a wrong ``signing_key``, ``signed=False``,
        an old ``timestamp``; a replay is the same ``event_id`` twice.
        """
        button_value = value if value is not None else {"req": request_id, "decision": decision}
        event = {
            "schema": "2.0",
            "header": {
                "event_id": event_id or uuid.uuid4().hex,
                "token": verification_token or self.verification_token,
                "create_time": str(int(time.time() * 1000)),
                "event_type": event_type,
                "tenant_key": "tenant_fake",
                "app_id": self.app_id,
            },
            "event": {
                "operator": {"tenant_key": "tenant_fake", "open_id": open_id,
                             "union_id": "on_" + open_id},
                "token": "c-" + secrets.token_hex(6),
                "action": {"value": json.dumps(button_value) if value_as_string
                           else button_value, "tag": "button"},
                "host": "im_message",
                "context": {"open_message_id": message_id or self._last_message_id(),
                            "open_chat_id": self.chat_id},
            },
        }
        return self._callback(event, encrypted=encrypted, timestamp=timestamp,
                              signing_key=signing_key, signed=signed)

    def url_verification(
        self,
        challenge: str = "challenge-123",
        *,
        encrypted: bool = False,
        verification_token: str | None = None,
    ) -> BuiltCallback:
        """The handshake Feishu sends when the callback URL is saved (never signed)."""
        event = {"challenge": challenge, "token": verification_token or self.verification_token,
                 "type": "url_verification"}
        return self._callback(event, encrypted=encrypted, timestamp=None, signing_key=None,
                              signed=False)

    def sign_body(self, body: bytes, *, timestamp: int | None = None,
               signing_key: str | None = None) -> BuiltCallback:
        """Any raw body, signed as Feishu would sign it (for malformed-body cases)."""
        key = signing_key or self.encrypt_key or ""
        ts, nonce = str(timestamp if timestamp is not None else int(time.time())), "nonce-1"
        headers = {"Content-Type": "application/json",
                   "X-Lark-Request-Timestamp": ts, "X-Lark-Request-Nonce": nonce,
                   "X-Lark-Signature": crypto.signature(ts, nonce, key, body)}
        return BuiltCallback("POST", headers, {}, body)

    def _callback(self, event: dict[str, Any], *, encrypted: bool, timestamp: int | None,
                  signing_key: str | None, signed: bool) -> BuiltCallback:
        plain = json.dumps(event, separators=(",", ":")).encode()
        if encrypted:
            assert self.encrypt_key is not None, "an encrypted callback needs an encrypt_key"
            body = json.dumps({"encrypt": crypto.encrypt(plain, self.encrypt_key)}).encode()
        else:
            body = plain
        if signed and (signing_key or self.encrypt_key):
            return self.sign_body(body, timestamp=timestamp, signing_key=signing_key)
        headers = {"Content-Type": "application/json"}
        if timestamp is not None:
            headers["X-Lark-Request-Timestamp"] = str(timestamp)
        return BuiltCallback("POST", headers, {}, body)

    def _last_message_id(self) -> str:
        return next(reversed(self.messages), "om_unknown")


def _ok(data: dict[str, Any]) -> JSONResponse:
    return JSONResponse({"code": 0, "msg": "success", "data": data},
                        headers={"X-Tt-Logid": secrets.token_hex(8)})


def _error(status: int, code: int, msg: str) -> JSONResponse:
    log_id = secrets.token_hex(8)
    return JSONResponse(
        {"code": code, "msg": msg, "error": {"log_id": log_id}},
        status_code=status,
        headers={"X-Tt-Logid": log_id},
    )
