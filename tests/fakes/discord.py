"""A fake Discord API on loopback, written from discord.com/developers/docs (Receiving and
Responding to Interactions, Message Components, Channel messages, Webhook follow-ups).

It serves ``POST``/``PATCH /api/v10/channels/{id}/messages[/{id}]`` (``Authorization: Bot``,
content at most 2000 characters, action rows of buttons with custom_id at most 100) and the
follow-up webhook ``POST /api/v10/webhooks/{application id}/{interaction token}``, and builds
interactions the way Discord POSTs them, Ed25519-signed over timestamp + body::

    with FakeDiscord() as fake:
        channel = DiscordChannel("ch1", "org1", fake.channel_config())
        click = fake.click(message, "Approve", user_id="200000000000000001")
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from starlette.responses import JSONResponse, Response

from tests.fakes.server import (
    BuiltCallback,
    FakePlatform,
    Handler,
    Received,
    json_of,
    require,
    require_keys,
)

CONTENT_CHARS = 2000
CUSTOM_ID_CHARS = 100
MESSAGE_KEYS = {"content", "components", "allowed_mentions", "embeds", "flags"}


def check_components(rows: Any) -> list[dict[str, Any]]:
    require(isinstance(rows, list) and len(rows) <= 5, "components: at most 5 action rows")
    for row in rows:
        row = require_keys(row, {"type", "components"}, "action row", {"type", "components"})
        require(row["type"] == 1 and len(row["components"]) <= 5, "an action row of 1-5")
        for button in row["components"]:
            button = require_keys(button, {"type", "style", "label", "custom_id", "url",
                                           "disabled", "emoji"}, "button", {"type", "style"})
            require(button["type"] == 2, "only buttons expected")
            custom_id = button.get("custom_id")
            require(isinstance(custom_id, str) and 1 <= len(custom_id) <= CUSTOM_ID_CHARS,
                    "custom_id: 1-100 characters")
    return list(rows)


@dataclass
class DiscordMessage:
    channel_id: str
    message_id: str
    content: str
    components: list[dict[str, Any]]
    edits: list[dict[str, Any]] = field(default_factory=list)

    def custom_ids(self) -> dict[str, str]:
        return {b["label"]: b["custom_id"] for row in self.components
                for b in row["components"]}


@dataclass(kw_only=True)
class FakeDiscord(FakePlatform):
    application_id: str = "100000000000000001"
    bot_token: str = "fake.discord.bot-token"
    channel_id: str = "300000000000000001"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.private_key = Ed25519PrivateKey.generate()
        self.messages: dict[str, DiscordMessage] = {}
        #: Ephemeral follow-ups by interaction token: {token: [bodies]}.
        self.followups: dict[str, list[dict[str, Any]]] = {}
        # Snowflakes: unique across fakes, as Discord's are.
        self._ids = itertools.count(400000000000000001 + uuid.uuid4().int % 10**15 * 1000)
        self._changed = threading.Condition()

    @property
    def public_key(self) -> str:
        return self.private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()

    def channel_config(self, **overrides: Any) -> dict[str, Any]:
        config: dict[str, Any] = {
            "application_id": self.application_id,
            "public_key": self.public_key,
            "bot_token": self.bot_token,
            "channel_id": self.channel_id,
            "base_url": self.url + "/api/v10",
            "retry": {"base_delay": 0.01, "max_delay": 0.05, "total_timeout": 5},
        }
        config.update(overrides)
        return config

    # -- the API ---------------------------------------------------------------------------

    def routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("POST", r"/api/v10/channels/(?P<cid>\d+)/messages", self._create),
            ("PATCH", r"/api/v10/channels/(?P<cid>\d+)/messages/(?P<mid>\d+)", self._edit),
            ("POST", r"/api/v10/webhooks/(?P<app>\d+)/(?P<token>[^/]+)", self._followup),
        ]

    def violation_response(self, message: str) -> Response:
        return JSONResponse({"code": 50035, "message": f"Invalid Form Body: {message}"},
                            status_code=400)

    def _authorized(self, received: Received) -> bool:
        return received.headers.get("authorization") == f"Bot {self.bot_token}"

    def _body(self, received: Received) -> dict[str, Any]:
        body = require_keys(json_of(received), MESSAGE_KEYS, "body")
        content = body.get("content", "")
        require(isinstance(content, str) and len(content) <= CONTENT_CHARS,
                "content: at most 2000 characters")
        require(body.get("allowed_mentions") == {"parse": []},
                "approval messages must not ping anyone (allowed_mentions)")
        return body

    def _create(self, received: Received, match: re.Match[str]) -> Response:
        if not self._authorized(received):
            return JSONResponse({"code": 0, "message": "401: Unauthorized"}, status_code=401)
        if match["cid"] != self.channel_id:
            return JSONResponse({"code": 10003, "message": "Unknown Channel"}, status_code=404)
        body = self._body(received)
        require(body.get("content"), "content required")
        message = DiscordMessage(self.channel_id, str(next(self._ids)), body["content"],
                                 check_components(body.get("components", [])))
        self.messages[message.message_id] = message
        return JSONResponse(self._message_json(message))

    def _edit(self, received: Received, match: re.Match[str]) -> Response:
        if not self._authorized(received):
            return JSONResponse({"code": 0, "message": "401: Unauthorized"}, status_code=401)
        message = self.messages.get(match["mid"])
        if message is None or message.channel_id != match["cid"]:
            return JSONResponse({"code": 10008, "message": "Unknown Message"}, status_code=404)
        body = self._body(received)
        with self._changed:
            message.content = body.get("content", message.content)
            if "components" in body:
                message.components = check_components(body["components"])
            message.edits.append(body)
            self._changed.notify_all()
        return JSONResponse(self._message_json(message))

    def _followup(self, received: Received, match: re.Match[str]) -> Response:
        require(match["app"] == self.application_id, "unknown application")
        body = require_keys(json_of(received), MESSAGE_KEYS, "follow-up")
        with self._changed:
            self.followups.setdefault(match["token"], []).append(body)
            self._changed.notify_all()
        return JSONResponse({"id": str(next(self._ids)), "content": body.get("content")})

    def _message_json(self, message: DiscordMessage) -> dict[str, Any]:
        return {"id": message.message_id, "channel_id": message.channel_id, "type": 0,
                "content": message.content, "components": message.components,
                "author": {"id": self.application_id, "bot": True, "username": "hookgate"}}

    def wait(self, ready: Any, what: str, timeout: float = 15.0) -> Any:
        """Block until ``ready()`` is truthy (the fake recorded it); fail after timeout."""
        with self._changed:
            if not self._changed.wait_for(ready, timeout):
                raise AssertionError(f"Discord never saw {what}")
            return ready()

    # -- interactions as Discord POSTs them ------------------------------------------------

    def signed(self, interaction: dict[str, Any], *, timestamp: int | None = None,
               key: Ed25519PrivateKey | None = None, signed: bool = True) -> BuiltCallback:
        body = json.dumps(interaction).encode()
        stamp = str(timestamp if timestamp is not None else int(time.time()))
        headers = {"Content-Type": "application/json"}
        if signed:
            signature = (key or self.private_key).sign(stamp.encode() + body)
            headers.update({"X-Signature-Ed25519": signature.hex(),
                            "X-Signature-Timestamp": stamp})
        return BuiltCallback("POST", headers, {}, body)

    def ping(self, **options: Any) -> BuiltCallback:
        return self.signed({"id": str(next(self._ids)), "application_id": self.application_id,
                            "type": 1, "token": uuid.uuid4().hex, "version": 1}, **options)

    def click(self, message: DiscordMessage, button: str, user_id: str, *,
              custom_id: str | None = None, token: str | None = None,
              **options: Any) -> BuiltCallback:
        """``user_id`` presses ``button`` ("Approve"/"Reject") on ``message`` in the guild."""
        interaction = {
            "id": str(next(self._ids)), "application_id": self.application_id, "type": 3,
            "token": token or "itoken-" + uuid.uuid4().hex, "version": 1,
            "guild_id": "500000000000000001", "channel_id": message.channel_id,
            "member": {"user": {"id": user_id, "username": f"user{user_id[-3:]}"},
                       "roles": [], "permissions": "0"},
            "message": self._message_json(message),
            "data": {"custom_id": custom_id or message.custom_ids()[button],
                     "component_type": 2},
            "app_permissions": "0", "locale": "en-US",
        }
        return self.signed(interaction, **options)
