"""A fake Telegram Bot API on loopback, written from core.telegram.org/bots/api.

It serves ``sendMessage`` and ``editMessageText`` at ``/bot<token>/<method>`` (JSON bodies;
answers ``{"ok": true, "result": Message}`` or ``{"ok": false, "error_code", "description"}``),
checks what Telegram checks (text 1-4096 characters, callback_data 1-64 bytes, a known
chat and message) and builds Updates the way Telegram POSTs them to a webhook, with the
``X-Telegram-Bot-Api-Secret-Token`` header. A webhook may answer an Update with a Bot API
call (``{"method": ..., ...}``); ``deliver`` performs it as Telegram does::

    with FakeTelegram() as fake:
        channel = TelegramChannel("ch1", "org1", fake.channel_config())
        update = fake.click(message_id, "approve", user_id=1001)
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.responses import JSONResponse, Response

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

TEXT_CHARS = 4096
CALLBACK_DATA_BYTES = 64
ANSWER_CHARS = 200
MESSAGE_KEYS = {"chat_id", "text", "reply_markup", "parse_mode", "link_preview_options",
                "disable_notification", "protect_content"}
EDIT_KEYS = {"chat_id", "message_id", "text", "reply_markup", "parse_mode",
             "link_preview_options"}


def check_keyboard(markup: Any, where: str) -> list[list[dict[str, Any]]]:
    """An InlineKeyboardMarkup as Telegram takes it: rows of buttons with one action each."""
    markup = require_keys(markup, {"inline_keyboard"}, where, {"inline_keyboard"})
    rows = markup["inline_keyboard"]
    require(isinstance(rows, list) and all(isinstance(r, list) for r in rows),
            f"{where}.inline_keyboard: an array of button rows")
    for row in rows:
        for button in row:
            button = require_keys(button, {"text", "callback_data", "url"}, f"{where} button",
                                  {"text"})
            require(isinstance(button["text"], str) and button["text"], "button text required")
            actions = {"callback_data", "url"} & set(button)
            require(len(actions) == 1, "a button needs exactly one of callback_data, url")
            if "callback_data" in button:
                data = button["callback_data"]
                require(isinstance(data, str)
                        and 1 <= len(data.encode()) <= CALLBACK_DATA_BYTES,
                        "BUTTON_DATA_INVALID: callback_data must be 1-64 bytes")
    return list(rows)


@dataclass
class TelegramMessage:
    chat_id: int
    message_id: int
    text: str
    keyboard: list[list[dict[str, Any]]]
    #: editMessageText bodies, in order.
    edits: list[dict[str, Any]] = field(default_factory=list)

    def callback_data(self) -> dict[str, str]:
        """{button text: callback_data} of the buttons left."""
        return {b["text"]: b["callback_data"] for row in self.keyboard for b in row
                if "callback_data" in b}


@dataclass(kw_only=True)
class FakeTelegram(FakePlatform):
    bot_token: str = "123456:AAFakeBotTokenForTheLoopbackBotApi"
    secret_token: str = "fake-webhook-secret-token-0123456789"
    chat_id: int = -1001234567890

    def __post_init__(self) -> None:
        super().__post_init__()
        self.messages: dict[int, TelegramMessage] = {}
        #: answerCallbackQuery calls made through webhook answers: {callback_query_id: body}.
        self.answers: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(100)
        self._updates = itertools.count(500_000)
        self._queries = itertools.count(7_000_000_000)
        self._edited = threading.Condition()

    def channel_config(self, **overrides: Any) -> dict[str, Any]:
        config: dict[str, Any] = {
            "bot_token": self.bot_token,
            "chat_id": str(self.chat_id),
            "secret_token": self.secret_token,
            "base_url": self.url,
            "retry": {"base_delay": 0.01, "max_delay": 0.05, "total_timeout": 5},
        }
        config.update(overrides)
        return config

    # -- the Bot API -----------------------------------------------------------------------

    def routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("POST", r"/bot(?P<token>[^/]+)/sendMessage", self._send_message),
            ("POST", r"/bot(?P<token>[^/]+)/editMessageText", self._edit_message_text),
        ]

    def violation_response(self, message: str) -> Response:
        return _error(400, f"Bad Request: {message}")

    def _send_message(self, received: Received, match: re.Match[str]) -> Response:
        if match["token"] != self.bot_token:
            return _error(401, "Unauthorized")
        body = require_keys(json_of(received), MESSAGE_KEYS, "body", {"chat_id", "text"})
        if str(body["chat_id"]) != str(self.chat_id):
            return _error(400, "Bad Request: chat not found")
        _check_text(body["text"])
        rows = check_keyboard(body["reply_markup"], "reply_markup") if "reply_markup" in body \
            else []
        message = TelegramMessage(self.chat_id, next(self._ids), body["text"], rows)
        self.messages[message.message_id] = message
        return JSONResponse({"ok": True, "result": self._message_json(message)})

    def _edit_message_text(self, received: Received, match: re.Match[str]) -> Response:
        if match["token"] != self.bot_token:
            return _error(401, "Unauthorized")
        body = require_keys(json_of(received), EDIT_KEYS, "body",
                            {"chat_id", "message_id", "text"})
        message = self.messages.get(body["message_id"])
        if message is None or str(body["chat_id"]) != str(message.chat_id):
            return _error(400, "Bad Request: message to edit not found")
        _check_text(body["text"])
        # Without reply_markup an edited message keeps no inline keyboard.
        rows = check_keyboard(body["reply_markup"], "reply_markup") if "reply_markup" in body \
            else []
        if body["text"] == message.text and rows == message.keyboard:
            return _error(400, "Bad Request: message is not modified: specified new message "
                               "content and reply markup are exactly the same")
        with self._edited:
            message.text, message.keyboard = body["text"], rows
            message.edits.append(body)
            self._edited.notify_all()
        return JSONResponse({"ok": True, "result": self._message_json(message)})

    def _message_json(self, message: TelegramMessage) -> dict[str, Any]:
        result: dict[str, Any] = {
            "message_id": message.message_id, "date": int(time.time()),
            "chat": {"id": message.chat_id, "type": "supergroup", "title": "Approvals"},
            "from": {"id": 123456, "is_bot": True, "first_name": "hookgate",
                     "username": "hookgate_bot"},
            "text": message.text}
        if message.keyboard:
            result["reply_markup"] = {"inline_keyboard": message.keyboard}
        return result

    def wait_for_edit(self, message: TelegramMessage, timeout: float = 15.0) -> dict[str, Any]:
        """The message's first edit, once Telegram has it (fails after ``timeout``)."""
        with self._edited:
            if not self._edited.wait_for(lambda: bool(message.edits), timeout):
                raise AssertionError(f"no editMessageText of message {message.message_id}")
            return message.edits[0]

    # -- updates as Telegram POSTs them to the webhook --------------------------------------

    def click(self, message: TelegramMessage, button: str, user_id: int, *,
              data: str | None = None, query_id: str | None = None,
              secret_token: str | None = None, signed: bool = True) -> BuiltCallback:
        """User ``user_id`` presses ``button`` ("Approve"/"Reject") under ``message``
        (``data`` sends other callback_data, as a modified client can)."""
        sent = data if data is not None else message.callback_data()[button]
        query = {
            "id": query_id or str(next(self._queries)),
            "from": {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"},
            "message": self._message_json(message),
            "chat_instance": "-8012345678901234567",
            "data": sent,
        }
        return self.update({"callback_query": query}, secret_token=secret_token,
                           signed=signed)

    def update(self, content: dict[str, Any], *, secret_token: str | None = None,
               signed: bool = True) -> BuiltCallback:
        body = json.dumps({"update_id": next(self._updates), **content}).encode()
        headers = {"Content-Type": "application/json"}
        if signed:
            headers["X-Telegram-Bot-Api-Secret-Token"] = secret_token or self.secret_token
        return BuiltCallback("POST", headers, {}, body)

    async def deliver(self, client: httpx.AsyncClient, url: str,
                      update: BuiltCallback) -> httpx.Response:
        """POST ``update`` to the webhook and, as Telegram does, perform the Bot API call
        its 2xx answer holds (here: answerCallbackQuery, recorded in ``answers``)."""
        reply = await update.send(client, url)
        if reply.is_success and reply.headers.get("content-type", "").startswith(
                "application/json") and reply.content:
            call = reply.json()
            if call.get("method") == "answerCallbackQuery":
                self._answer_callback_query(call)
            elif call.get("method") is not None:
                self.violations.append(f"unexpected webhook answer {call.get('method')}")
        return reply

    def _answer_callback_query(self, call: dict[str, Any]) -> None:
        allowed = {"method", "callback_query_id", "text", "show_alert", "url", "cache_time"}
        try:
            require_keys(call, allowed, "answerCallbackQuery", {"callback_query_id"})
            require(len(str(call.get("text", ""))) <= ANSWER_CHARS,
                    "answerCallbackQuery text: 0-200 characters")
            require(call["callback_query_id"] not in self.answers,
                    "QUERY_ID_INVALID: the callback query was already answered")
        except ShapeViolation as exc:
            self.violations.append(f"answerCallbackQuery: {exc}")
            return
        self.answers[call["callback_query_id"]] = call


def _check_text(text: Any) -> None:
    require(isinstance(text, str) and text.strip(), "message text is empty")
    require(len(text) <= TEXT_CHARS, "message is too long")


def _error(code: int, description: str) -> Response:
    return JSONResponse({"ok": False, "error_code": code, "description": description},
                        status_code=code)
