"""A fake ntfy server on loopback, written from docs.ntfy.sh (publishing as JSON, action
buttons): ``POST /`` takes ``{"topic", "title", "message", "priority", "tags", "actions"}``
with at most three actions (``view`` or ``http``), and a phone's press on an ``http`` button
is rebuilt as the request the ntfy app sends (``press``). A message published with a
``sequence_id`` that names an earlier message of its topic (that message's id, or the
sequence id it was published with) replaces that notification on the phone (ntfy 2.16,
"Updating notifications"); ``shown`` is what the phone shows."""

from __future__ import annotations

import itertools
import re
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

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

PUBLISH_KEYS = {"topic", "title", "message", "priority", "tags", "actions", "click",
                "markdown", "icon", "delay", "email", "call", "attach", "filename",
                "sequence_id"}
SEQUENCE_ID = r"[-_A-Za-z0-9]{1,64}"
ACTION_KEYS = {"action", "label", "url", "method", "headers", "body", "clear"}


@dataclass
class Notification:
    id: str
    topic: str
    body: dict[str, Any]

    @property
    def sequence(self) -> str:
        """The sequence it belongs to: its own id unless published with a sequence id."""
        return str(self.body.get("sequence_id") or self.id)

    def button(self, label: str) -> dict[str, Any]:
        return next(a for a in self.body.get("actions", []) if a["label"] == label)


@dataclass(kw_only=True)
class FakeNtfy(FakePlatform):
    access_token: str = "tk_fakentfyaccesstoken0000000000"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.notifications: list[Notification] = []
        self._ids = itertools.count(1)
        self._published = threading.Condition()

    def channel_config(self, topics: list[str], **overrides: Any) -> dict[str, Any]:
        config: dict[str, Any] = {
            "topics": topics, "access_token": self.access_token,
            "link_secret": "fake-ntfy-link-secret-0123456789abcdef",
            "callback_url": "https://gate.example/api/channels/ops-ntfy/callback",
            "base_url": self.url,
            "retry": {"base_delay": 0.01, "max_delay": 0.05, "total_timeout": 5},
        }
        config.update(overrides)
        return config

    def routes(self) -> list[tuple[str, str, Handler]]:
        return [("POST", r"/", self._publish)]

    def violation_response(self, message: str) -> Response:
        return JSONResponse({"code": 40001, "http": 400, "error": message}, status_code=400)

    def _publish(self, received: Received, match: re.Match[str]) -> Response:
        if received.headers.get("authorization") != f"Bearer {self.access_token}":
            return JSONResponse({"code": 40101, "http": 401, "error": "unauthorized"},
                                status_code=401)
        body = require_keys(json_of(received), PUBLISH_KEYS, "message", {"topic"})
        require(re.fullmatch(r"[-_A-Za-z0-9]{1,64}", body["topic"]), "invalid topic")
        if "sequence_id" in body:
            require(isinstance(body["sequence_id"], str)
                    and re.fullmatch(SEQUENCE_ID, body["sequence_id"]), "invalid sequence id")
        actions = body.get("actions", [])
        require(isinstance(actions, list) and len(actions) <= 3, "at most 3 actions")
        for action in actions:
            action = require_keys(action, ACTION_KEYS, "action", {"action", "label"})
            require(action["action"] in ("view", "http", "broadcast"), "unknown action")
            if action["action"] in ("view", "http"):
                require(str(action.get("url", "")).startswith(("http://", "https://")),
                        "an action needs an http(s) url")
        notification = Notification(f"fake{next(self._ids):08d}", body["topic"], body)
        with self._published:
            self.notifications.append(notification)
            self._published.notify_all()
        return JSONResponse({"id": notification.id, "time": int(time.time()),
                             "expires": int(time.time()) + 43200, "event": "message",
                             "topic": body["topic"], "message": body.get("message", "")})

    def to(self, topic: str) -> list[Notification]:
        return [n for n in self.notifications if n.topic == topic]

    def shown(self, topic: str) -> list[Notification]:
        """The topic's notifications on the phone: the latest message of each sequence."""
        latest: dict[str, Notification] = {}
        for notification in self.to(topic):
            latest.pop(notification.sequence, None)
            latest[notification.sequence] = notification
        return list(latest.values())

    def wait(self, ready: Any, what: str, timeout: float = 15.0) -> Any:
        with self._published:
            if not self._published.wait_for(ready, timeout):
                raise AssertionError(f"ntfy never got {what}")
            return ready()

    @staticmethod
    def press(notification: Notification, label: str) -> tuple[str, BuiltCallback]:
        """(the path, the request) the ntfy app sends for an ``http`` button."""
        button = notification.button(label)
        require(button["action"] == "http", f"{label} is not an http action")
        path = urlsplit(button["url"]).path
        return path, BuiltCallback(button.get("method", "POST"),
                                   dict(button.get("headers", {})), {},
                                   str(button.get("body", "")).encode())
