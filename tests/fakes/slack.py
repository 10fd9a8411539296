"""A fake Slack Web API on loopback, strict about Block Kit, and Slack-style interactivity.

It serves ``chat.postMessage`` / ``chat.update`` under ``/api/`` (bearer bot token, JSON,
blocks checked against Block Kit's limits) and builds signed ``block_actions`` payloads
the way Slack POSTs them to the interactivity URL::

    with FakeSlack() as fake:
        channel = SlackChannel("ch1", "org1", fake.channel_config())
        callback = fake.block_action("r1", "approve", user_id="U_ALICE")
"""

from __future__ import annotations

import itertools
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from starlette.responses import JSONResponse, Response

from hookgate.channels.slack import signing
from tests.fakes.server import (
    BuiltCallback,
    FakePlatform,
    Handler,
    Received,
    json_of,
    require,
    require_keys,
)

BLOCK_KEYS: dict[str, set[str]] = {
    "header": {"type", "text", "block_id"},
    "section": {"type", "text", "block_id", "fields", "accessory"},
    "context": {"type", "elements", "block_id"},
    "actions": {"type", "elements", "block_id"},
    "divider": {"type", "block_id"},
}
BUTTON_KEYS = {"type", "action_id", "text", "value", "style", "url", "confirm",
               "accessibility_label"}


def check_blocks(blocks: Any) -> None:
    """Raise ShapeViolation unless ``blocks`` is a message's Block Kit Slack would accept."""
    require(isinstance(blocks, list) and 0 < len(blocks) <= 50, "blocks: 1 to 50 blocks")
    block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        where = f"blocks[{i}]"
        require(isinstance(block, dict) and block.get("type") in BLOCK_KEYS,
                f"{where}: unknown block type")
        require_keys(block, BLOCK_KEYS[block["type"]], where, {"type"})
        if "block_id" in block:
            require(isinstance(block["block_id"], str) and len(block["block_id"]) <= 255,
                    f"{where}.block_id: a string of at most 255 chars")
            require(block["block_id"] not in block_ids, f"{where}: duplicate block_id")
            block_ids.add(block["block_id"])
        kind = block["type"]
        if kind == "header":
            _check_text(block.get("text"), f"{where}.text", 150, plain_only=True)
        elif kind == "section":
            _check_text(block.get("text"), f"{where}.text", 3000)
        elif kind == "context":
            elements = block.get("elements")
            require(isinstance(elements, list) and 0 < len(elements) <= 10,
                    f"{where}.elements: 1 to 10")
            for j, element in enumerate(elements):
                _check_text(element, f"{where}.elements[{j}]", 3000)
        elif kind == "actions":
            _check_actions(block, where)


def _check_text(obj: Any, where: str, limit: int, plain_only: bool = False) -> None:
    text = require_keys(obj, {"type", "text", "emoji", "verbatim"}, where, {"type", "text"})
    kinds = ("plain_text",) if plain_only else ("plain_text", "mrkdwn")
    require(text["type"] in kinds, f"{where}.type must be one of {kinds}")
    require(isinstance(text["text"], str) and 0 < len(text["text"]) <= limit,
            f"{where}.text: 1 to {limit} chars")


def _check_actions(block: dict[str, Any], where: str) -> None:
    elements: Any = block.get("elements")
    require(isinstance(elements, list) and 0 < len(elements) <= 25, f"{where}: 1 to 25 elements")
    action_ids: set[str] = set()
    for j, button in enumerate(elements):
        at = f"{where}.elements[{j}]"
        button = require_keys(button, BUTTON_KEYS, at, {"type", "text", "action_id"})
        require(button["type"] == "button", f"{at}: only buttons expected")
        _check_text(button["text"], f"{at}.text", 75, plain_only=True)
        action_id = button["action_id"]
        require(isinstance(action_id, str) and 0 < len(action_id) <= 255,
                f"{at}.action_id: 1 to 255 chars")
        require(action_id not in action_ids, f"{at}: duplicate action_id in the block")
        action_ids.add(action_id)
        require(len(str(button.get("value", ""))) <= 2000, f"{at}.value: at most 2000 chars")
        require(button.get("style", "primary") in ("primary", "danger"), f"{at}: bad style")


def block_texts(blocks: list[dict[str, Any]]) -> str:
    """All the text a message's blocks show, joined."""
    parts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("text"), str):
                parts.append(node["text"])
            for value in node.values():
                if isinstance(value, dict | list):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(blocks)
    return "\n".join(parts)


@dataclass
class SlackMessage:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]] | None
    updates: list[dict[str, Any]] = field(default_factory=list)


@dataclass(kw_only=True)
class FakeSlack(FakePlatform):
    bot_token: str = "xoxb-fake-bot-token"
    signing_secret: str = "fake-signing-secret"
    channel_id: str = "C0APPROVALS"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.messages: dict[str, SlackMessage] = {}
        self._ts = itertools.count(1)

    def channel_config(self, **overrides: Any) -> dict[str, Any]:
        config: dict[str, Any] = {
            "bot_token": self.bot_token,
            "channel": self.channel_id,
            "signing_secret": self.signing_secret,
            "base_url": self.url + "/api/",
            "retry": {"base_delay": 0.01, "max_delay": 0.05, "total_timeout": 5},
        }
        config.update(overrides)
        return config

    # -- the API ---------------------------------------------------------------------------

    def routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("POST", "/api/chat.postMessage", self._post_message),
            ("POST", "/api/chat.update", self._update),
        ]

    def violation_response(self, message: str) -> Response:
        return JSONResponse({"ok": False, "error": "invalid_arguments",
                             "response_metadata": {"messages": [message]}})

    def _authorized(self, received: Received) -> bool:
        auth = received.headers.get("authorization", "")
        require(auth.startswith("Bearer "), "missing 'Authorization: Bearer xoxb-...'")
        return auth == f"Bearer {self.bot_token}"

    def _post_message(self, received: Received, match: re.Match[str]) -> Response:
        if not self._authorized(received):
            return JSONResponse({"ok": False, "error": "invalid_auth"})
        body = require_keys(json_of(received), {"channel", "text", "blocks"}, "body",
                            {"channel", "text"})
        if body["channel"] != self.channel_id:
            return JSONResponse({"ok": False, "error": "channel_not_found"})
        require(isinstance(body["text"], str) and body["text"], "text (the fallback) is required")
        if "blocks" in body:
            check_blocks(body["blocks"])
        ts = f"{int(time.time())}.{next(self._ts):06d}"
        message = SlackMessage(self.channel_id, ts, body["text"], body.get("blocks"))
        self.messages[ts] = message
        return JSONResponse({"ok": True, "channel": self.channel_id, "ts": ts,
                             "message": {"text": message.text, "blocks": message.blocks}})

    def _update(self, received: Received, match: re.Match[str]) -> Response:
        if not self._authorized(received):
            return JSONResponse({"ok": False, "error": "invalid_auth"})
        body = require_keys(json_of(received), {"channel", "ts", "text", "blocks"}, "body",
                            {"channel", "ts"})
        message = self.messages.get(body["ts"])
        if message is None or message.channel != body["channel"]:
            return JSONResponse({"ok": False, "error": "message_not_found"})
        if "blocks" in body:
            check_blocks(body["blocks"])
        message.updates.append(body)
        message.text, message.blocks = body.get("text", message.text), body.get("blocks")
        return JSONResponse({"ok": True, "channel": message.channel, "ts": message.ts,
                             "text": message.text})

    # -- interactivity as Slack sends it ---------------------------------------------------

    def block_action(
        self,
        request_id: str,
        decision: str,
        user_id: str = "U_APPROVER",
        *,
        timestamp: int | None = None,
        signing_secret: str | None = None,
        signed: bool = True,
        message_ts: str | None = None,
        action_ts: str | None = None,
        payload_type: str = "block_actions",
    ) -> BuiltCallback:
        """A click on an approval button of the last message (or ``message_ts``)."""
        ts = message_ts or next(reversed(self.messages), "1700000000.000001")
        payload = {
            "type": payload_type,
            "user": {"id": user_id, "username": user_id.lower(), "team_id": "T0FAKE"},
            "api_app_id": "A0FAKE",
            "container": {"type": "message", "message_ts": ts, "channel_id": self.channel_id,
                          "is_ephemeral": False},
            "trigger_id": "111.222.fake",
            "team": {"id": "T0FAKE", "domain": "fake"},
            "channel": {"id": self.channel_id, "name": "approvals"},
            "response_url": "https://hooks.slack.invalid/actions/T0FAKE/1/x",
            "actions": [{
                "action_id": decision, "block_id": f"approval_{request_id}", "type": "button",
                "value": request_id, "text": {"type": "plain_text", "text": decision.title()},
                "action_ts": action_ts or f"{time.time():.6f}",
            }],
        }
        body = urlencode({"payload": json.dumps(payload)}).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if signed:
            stamp = str(timestamp if timestamp is not None else int(time.time()))
            headers["X-Slack-Request-Timestamp"] = stamp
            headers["X-Slack-Signature"] = signing.signature(
                signing_secret or self.signing_secret, stamp, body
            )
        return BuiltCallback("POST", headers, {}, body)
