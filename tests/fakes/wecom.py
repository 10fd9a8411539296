"""A fake WeCom (企业微信) server API on loopback, and WeCom-style encrypted callbacks.

It issues access tokens (and can expire them), takes ``template_card`` button_interaction
app messages (task_id alphabet and uniqueness, button keys, recipients, agent id checked),
hands out single-use ``response_code``s and honours them once in
``update_template_card``. It builds the GET echostr handshake and the POSTed encrypted
``template_card_event`` the way WeCom sends them, signed or forged::

    with FakeWeCom() as fake:
        channel = WeComChannel("ch1", "org1", fake.channel_config())
        callback = fake.card_click("r1", "approve", user_id="alice")
"""

from __future__ import annotations

import base64
import itertools
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from starlette.responses import JSONResponse, Response

from hookgate.channels.wecom.crypto import WeComCrypto, signature
from tests.fakes.server import (
    BuiltCallback,
    FakePlatform,
    Handler,
    Received,
    json_of,
    require,
    require_keys,
)

TOKEN_PATH = "/cgi-bin/gettoken"
SEND_PATH = "/cgi-bin/message/send"
UPDATE_PATH = "/cgi-bin/message/update_template_card"

CARD_KEYS = {"card_type", "source", "action_menu", "main_title", "quote_area",
             "sub_title_text", "horizontal_content_list", "card_action", "jump_list",
             "task_id", "button_selection", "button_list", "emphasis_content"}


def check_template_card(card: Any) -> None:
    """Raise ShapeViolation unless ``card`` is a button_interaction card WeCom would take."""
    card = require_keys(card, CARD_KEYS, "template_card",
                        {"card_type", "main_title", "task_id", "button_list"})
    require(card["card_type"] == "button_interaction", "card_type must be button_interaction")
    title = require_keys(card["main_title"], {"title", "desc"}, "main_title", {"title"})
    require(isinstance(title["title"], str) and title["title"], "main_title.title is required")
    require(re.fullmatch(r"[0-9A-Za-z_\-@]{1,128}", str(card["task_id"])),
            "task_id: 1 to 128 of [0-9A-Za-z_-@]")
    rows = card.get("horizontal_content_list", [])
    require(isinstance(rows, list) and len(rows) <= 6, "horizontal_content_list: at most 6")
    for i, row in enumerate(rows):
        row = require_keys(row, {"keyname", "value", "type", "url", "media_id", "userid"},
                           f"horizontal_content_list[{i}]", {"keyname"})
        require(row.get("type", 0) != 1 or row.get("url"), "a type 1 row needs a url")
    buttons = card["button_list"]
    require(isinstance(buttons, list) and 0 < len(buttons) <= 6, "button_list: 1 to 6 buttons")
    keys: set[str] = set()
    for i, button in enumerate(buttons):
        button = require_keys(button, {"type", "text", "style", "key", "url"},
                              f"button_list[{i}]", {"text"})
        require(button.get("style", 1) in (1, 2, 3, 4), f"button_list[{i}].style: 1..4")
        if button.get("type", 0) == 0:
            key: Any = button.get("key")
            require(isinstance(key, str) and 0 < len(key.encode()) <= 1024,
                    f"button_list[{i}].key: 1 to 1024 bytes")
            require(key not in keys, f"button_list[{i}]: duplicate key")
            keys.add(key)


@dataclass
class WeComCard:
    task_id: str
    touser: str
    card: dict[str, Any]
    response_code: str
    updates: list[dict[str, Any]] = field(default_factory=list)


@dataclass(kw_only=True)
class FakeWeCom(FakePlatform):
    corp_id: str = "ww_fakecorp"
    corp_secret: str = "fake-corp-secret"
    agent_id: int = 1000002
    token: str = "fakeCallbackToken"
    encoding_aes_key: str = field(
        default_factory=lambda: base64.b64encode(secrets.token_bytes(32)).decode().rstrip("=")
    )
    touser: str = "alice|bob"

    token_path: ClassVar[str] = TOKEN_PATH

    def __post_init__(self) -> None:
        super().__post_init__()
        self.cards: dict[str, WeComCard] = {}  # by task_id
        self.texts: list[str] = []
        self.response_codes: dict[str, str | None] = {}  # code -> task_id, None once used
        self._msgids = itertools.count(1)

    def channel_config(self, **overrides: Any) -> dict[str, Any]:
        config: dict[str, Any] = {
            "corp_id": self.corp_id,
            "corp_secret": self.corp_secret,
            "agent_id": self.agent_id,
            "token": self.token,
            "encoding_aes_key": self.encoding_aes_key,
            "touser": self.touser,
            "base_url": self.url,
            "retry": {"base_delay": 0.01, "max_delay": 0.05, "total_timeout": 5},
        }
        config.update(overrides)
        return config

    # -- the API ---------------------------------------------------------------------------

    def routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("GET", re.escape(TOKEN_PATH), self._gettoken),
            ("POST", re.escape(SEND_PATH), self._send),
            ("POST", re.escape(UPDATE_PATH), self._update),
        ]

    def violation_response(self, message: str) -> Response:
        return _errcode(40058, f"invalid request: {message}")

    def _gettoken(self, received: Received, match: re.Match[str]) -> Response:
        if received.query.get("corpid") != self.corp_id:
            return _errcode(40013, "invalid corpid")
        if received.query.get("corpsecret") != self.corp_secret:
            return _errcode(40001, "invalid credential")
        token = secrets.token_urlsafe(24)
        self.tokens[token] = time.time() + 7200
        return JSONResponse({"errcode": 0, "errmsg": "ok", "access_token": token,
                             "expires_in": 7200})

    def _authorize(self, received: Received) -> Response | None:
        token = received.query.get("access_token")
        require(token, "missing access_token in the query")
        state = self.token_state(token or "")
        if state == "unknown":
            return _errcode(40014, "invalid access_token")
        if state == "expired":
            return _errcode(42001, "access_token expired")
        return None

    def _send(self, received: Received, match: re.Match[str]) -> Response:
        refused = self._authorize(received)
        if refused:
            return refused
        body = json_of(received)
        require(isinstance(body, dict), "the body must be an object")
        require(body.get("agentid") == self.agent_id and isinstance(body.get("agentid"), int),
                f"agentid must be the number {self.agent_id}")
        require(body.get("touser") == self.touser, f"unexpected touser {body.get('touser')!r}")
        msgtype = body.get("msgtype")
        common = {"touser", "toparty", "totag", "msgtype", "agentid", "safe",
                  "enable_id_trans", "enable_duplicate_check", "duplicate_check_interval"}
        if msgtype == "text":
            require_keys(body, common | {"text"}, "body", {"text"})
            require_keys(body["text"], {"content"}, "text", {"content"})
            self.texts.append(body["text"]["content"])
            return _sent(next(self._msgids), None)
        require(msgtype == "template_card", f"unexpected msgtype {msgtype!r}")
        require_keys(body, common | {"template_card"}, "body", {"template_card"})
        card = body["template_card"]
        check_template_card(card)
        if card["task_id"] in self.cards:
            return _errcode(42014, "taskid has existed or empty or exceed max len")
        code = "rc-" + secrets.token_hex(8)
        self.cards[card["task_id"]] = WeComCard(card["task_id"], body["touser"], card, code)
        self.response_codes[code] = card["task_id"]
        return _sent(next(self._msgids), code)

    def _update(self, received: Received, match: re.Match[str]) -> Response:
        refused = self._authorize(received)
        if refused:
            return refused
        body = require_keys(json_of(received),
                            {"userids", "partyids", "tagids", "atall", "agentid",
                             "response_code", "button", "template_card", "enable_id_trans"},
                            "body", {"agentid", "response_code"})
        require(body["agentid"] == self.agent_id, "agentid does not match")
        require(any(body.get(k) for k in ("userids", "partyids", "tagids", "atall")),
                "name who to update: userids, partyids, tagids or atall")
        require(("button" in body) != ("template_card" in body),
                "give exactly one of button or template_card")
        if "button" in body:
            button = require_keys(body["button"], {"replace_name"}, "button", {"replace_name"})
            require(isinstance(button["replace_name"], str) and button["replace_name"],
                    "button.replace_name must be text")
        task_id = self.response_codes.get(body["response_code"])
        if task_id is None:  # unknown, or used once already
            return _errcode(40133, "invalid response_code (unknown or already used)")
        self.response_codes[body["response_code"]] = None
        self.cards[task_id].updates.append(body)
        return JSONResponse({"errcode": 0, "errmsg": "ok", "invaliduser": []})

    # -- callbacks as WeCom sends them -----------------------------------------------------

    def echostr_handshake(
        self,
        echo: str | None = None,
        *,
        timestamp: int | None = None,
        token: str | None = None,
        receive_id: str | None = None,
    ) -> BuiltCallback:
        """The GET WeCom sends when the callback URL is saved; the plaintext is ``echo``."""
        echo = echo or str(secrets.randbits(62))
        encrypted = self._crypto(receive_id).encrypt(echo.encode())
        query = self._signed_query(encrypted, timestamp, token)
        query["echostr"] = encrypted
        return BuiltCallback("GET", {}, query, b"")

    def card_click(
        self,
        request_id: str,
        decision: str,
        user_id: str = "alice",
        *,
        task_id: str | None = None,
        event_key: str | None = None,
        create_time: int | None = None,
        timestamp: int | None = None,
        token: str | None = None,
        receive_id: str | None = None,
        signed: bool = True,
        event: str = "template_card_event",
        inner_xml: bytes | None = None,
    ) -> BuiltCallback:
        """A click on a card's button: an encrypted ``template_card_event`` POST.

        Each click carries a fresh single-use ResponseCode. Forgeries: another ``token``
        (wrong signature), another ``receive_id`` (a different corp), ``signed=False``.
        """
        task = task_id or next(
            (t for t, c in self.cards.items() if f":{request_id}" in str(c.card)),
            f"req_{request_id}",
        )
        code = "rc-" + secrets.token_hex(8)
        self.response_codes[code] = task if task in self.cards else None
        stamp = create_time if create_time is not None else int(time.time())
        plain = inner_xml or (
            f"<xml><ToUserName><![CDATA[{self.corp_id}]]></ToUserName>"
            f"<FromUserName><![CDATA[{user_id}]]></FromUserName>"
            f"<CreateTime>{stamp}</CreateTime>"
            f"<MsgType><![CDATA[event]]></MsgType>"
            f"<Event><![CDATA[{event}]]></Event>"
            f"<EventKey><![CDATA[{event_key or f'{decision}:{request_id}'}]]></EventKey>"
            f"<TaskId><![CDATA[{task}]]></TaskId>"
            f"<CardType><![CDATA[button_interaction]]></CardType>"
            f"<ResponseCode><![CDATA[{code}]]></ResponseCode>"
            f"<AgentID>{self.agent_id}</AgentID></xml>"
        ).encode()
        encrypted = self._crypto(receive_id).encrypt(plain)
        body = (
            f"<xml><ToUserName><![CDATA[{self.corp_id}]]></ToUserName>"
            f"<AgentID><![CDATA[{self.agent_id}]]></AgentID>"
            f"<Encrypt><![CDATA[{encrypted}]]></Encrypt></xml>"
        ).encode()
        query = self._signed_query(encrypted, timestamp, token) if signed else {}
        return BuiltCallback("POST", {"Content-Type": "text/xml"}, query, body)

    def _crypto(self, receive_id: str | None) -> WeComCrypto:
        return WeComCrypto(self.encoding_aes_key, receive_id or self.corp_id)

    def _signed_query(self, encrypted: str, timestamp: int | None,
                      token: str | None) -> dict[str, str]:
        stamp = str(timestamp if timestamp is not None else int(time.time()))
        nonce = str(secrets.randbits(30))
        return {"msg_signature": signature(token or self.token, stamp, nonce, encrypted),
                "timestamp": stamp, "nonce": nonce}


def _sent(msgid: int, response_code: str | None) -> JSONResponse:
    body: dict[str, Any] = {"errcode": 0, "errmsg": "ok", "invaliduser": "",
                            "invalidparty": "", "invalidtag": "", "unlicenseduser": "",
                            "msgid": f"msg{msgid}"}
    if response_code is not None:
        body["response_code"] = response_code
    return JSONResponse(body)


def _errcode(code: int, message: str) -> JSONResponse:
    return JSONResponse({"errcode": code, "errmsg": message})
