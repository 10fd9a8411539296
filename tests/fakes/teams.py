"""A fake Microsoft Teams (Bot Connector and Entra ID) on loopback, written from Microsoft's
"Authentication with the Bot Connector API", the Bot Connector REST reference and the
Adaptive Cards Universal Actions documentation.

It serves the OpenID metadata and its key set (RS256 keys endorsing ``msteams``), the
client-credentials token endpoint, and ``POST``/``PUT v3/conversations/{id}/activities``
(bearer token, Adaptive Card 1.4 attachments checked); and it builds ``adaptiveCard/action``
invokes the way the Connector POSTs them to a bot, with a JWT it signs::

    with FakeTeams() as fake:
        channel = TeamsChannel("ch1", "org1", fake.channel_config())
        invoke = fake.invoke(activity_id, "approve", aad_object_id="aad-alice")
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
from urllib.parse import parse_qsl, unquote

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
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

ISSUER = "https://api.botframework.com"
CARD_TYPE = "application/vnd.microsoft.card.adaptive"
ELEMENTS = {"TextBlock", "RichTextBlock", "FactSet", "Container", "ColumnSet"}
ACTIONS = {"Action.Execute", "Action.OpenUrl", "Action.Submit", "Action.ShowCard"}


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def check_card(card: Any) -> None:
    """An Adaptive Card Teams would render, with Universal Actions (version 1.4 or later)."""
    card = require_keys(card, {"type", "$schema", "version", "body", "actions", "refresh"},
                        "card", {"type", "version", "body"})
    require(card["type"] == "AdaptiveCard", "card.type must be AdaptiveCard")
    require(tuple(int(p) for p in str(card["version"]).split(".")) >= (1, 4),
            "Action.Execute needs card version 1.4 or later")
    require(isinstance(card["body"], list) and card["body"], "card.body: 1 or more elements")
    for element in card["body"]:
        require(isinstance(element, dict) and element.get("type") in ELEMENTS,
                f"unknown element {element.get('type') if isinstance(element, dict) else ''}")
        if element["type"] == "RichTextBlock":
            for run in element.get("inlines", []):
                require(run.get("type") == "TextRun" and isinstance(run.get("text"), str),
                        "RichTextBlock.inlines: TextRuns")
    for action in card.get("actions", []):
        require(action.get("type") in ACTIONS, f"unknown action {action.get('type')}")
        if action["type"] == "Action.Execute":
            require(isinstance(action.get("verb"), str), "Action.Execute needs a verb")


@dataclass
class TeamsActivity:
    conversation_id: str
    activity_id: str
    card: dict[str, Any] | None
    text: str | None
    #: PUT bodies, in order.
    updates: list[dict[str, Any]] = field(default_factory=list)


@dataclass(kw_only=True)
class FakeTeams(FakePlatform):
    app_id: str = "00000000-aaaa-4bbb-8ccc-000000000001"
    app_password: str = "fake-client-secret"
    conversation_id: str = "19:approvals0123456789@thread.tacv2"
    tenant_id: str = "botframework.com"
    token_path = "/botframework.com/oauth2/v2.0/token"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.key = new_key()
        self.kid = "fake-kid-1"
        self.activities: dict[str, TeamsActivity] = {}
        self._ids = itertools.count(1)
        self._updated = threading.Condition()

    @property
    def service_url(self) -> str:
        return self.url + "/"

    def channel_config(self, **overrides: Any) -> dict[str, Any]:
        config: dict[str, Any] = {
            "app_id": self.app_id,
            "app_password": self.app_password,
            "conversation_id": self.conversation_id,
            "base_url": self.service_url,
            "openid_metadata_url": self.url + "/v1/.well-known/openidconfiguration",
            "login_url": self.url,
            "retry": {"base_delay": 0.01, "max_delay": 0.05, "total_timeout": 5},
        }
        config.update(overrides)
        return config

    # -- the services ----------------------------------------------------------------------

    def routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("GET", r"/v1/\.well-known/openidconfiguration", self._metadata),
            ("GET", r"/v1/\.well-known/keys", self._keys),
            ("POST", r"/(?P<tenant>[^/]+)/oauth2/v2\.0/token", self._token),
            ("POST", r"/v3/conversations/(?P<cid>[^/]+)/activities", self._post_activity),
            ("PUT", r"/v3/conversations/(?P<cid>[^/]+)/activities/(?P<aid>[^/]+)",
             self._put_activity),
        ]

    def violation_response(self, message: str) -> Response:
        return JSONResponse({"error": {"code": "BadSyntax", "message": message}},
                            status_code=400)

    def _metadata(self, received: Received, match: re.Match[str]) -> Response:
        return JSONResponse({"issuer": ISSUER, "authorization_endpoint": "",
                             "jwks_uri": self.url + "/v1/.well-known/keys",
                             "id_token_signing_alg_values_supported": ["RS256"],
                             "token_endpoint_auth_methods_supported": ["private_key_jwt"]})

    def _keys(self, received: Received, match: re.Match[str]) -> Response:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update(kid=self.kid, use="sig", endorsements=["msteams", "webchat"])
        return JSONResponse({"keys": [jwk]})

    def _token(self, received: Received, match: re.Match[str]) -> Response:
        form = dict(parse_qsl(received.body.decode()))
        require(received.headers.get("content-type", "").startswith(
            "application/x-www-form-urlencoded"), "the token request is a form")
        require(form.get("grant_type") == "client_credentials", "grant_type")
        require(form.get("scope") == "https://api.botframework.com/.default", "scope")
        if match["tenant"] != self.tenant_id or (form.get("client_id"), form.get(
                "client_secret")) != (self.app_id, self.app_password):
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        token = "eyFake." + uuid.uuid4().hex
        self.tokens[token] = time.time() + 3599
        return JSONResponse({"token_type": "Bearer", "expires_in": 3599,
                             "ext_expires_in": 3599, "access_token": token})

    def _authorized(self, received: Received) -> bool:
        auth = received.headers.get("authorization", "")
        return self.token_state(auth.removeprefix("Bearer ")) == "valid"

    def _post_activity(self, received: Received, match: re.Match[str]) -> Response:
        if not self._authorized(received):
            return JSONResponse({"message": "Authorization has been denied"}, status_code=401)
        if unquote(match["cid"]) != self.conversation_id:
            return JSONResponse({"error": {"code": "ConversationNotFound"}}, status_code=404)
        body = json_of(received)
        card, text = self._content(body)
        activity = TeamsActivity(self.conversation_id, f"1700000000{next(self._ids):03d}",
                                 card, text)
        self.activities[activity.activity_id] = activity
        return JSONResponse({"id": activity.activity_id}, status_code=201)

    def _put_activity(self, received: Received, match: re.Match[str]) -> Response:
        if not self._authorized(received):
            return JSONResponse({"message": "Authorization has been denied"}, status_code=401)
        activity = self.activities.get(unquote(match["aid"]))
        if activity is None or unquote(match["cid"]) != activity.conversation_id:
            return JSONResponse({"error": {"code": "ActivityNotFound"}}, status_code=404)
        body = json_of(received)
        card, text = self._content(body)
        with self._updated:
            activity.card, activity.text = card, text
            activity.updates.append(body)
            self._updated.notify_all()
        return JSONResponse({"id": activity.activity_id})

    def _content(self, body: Any) -> tuple[dict[str, Any] | None, str | None]:
        body = require_keys(body, {"type", "id", "text", "textFormat", "attachments"},
                            "activity", {"type"})
        require(body["type"] == "message", "activity.type must be message")
        card = None
        for item in body.get("attachments", []):
            item = require_keys(item, {"contentType", "content"}, "attachment",
                                {"contentType", "content"})
            require(item["contentType"] == CARD_TYPE, "attachments: Adaptive Cards only")
            check_card(item["content"])
            card = item["content"]
        require(card is not None or body.get("text"), "an activity needs text or a card")
        return card, body.get("text")

    def wait_for_update(self, activity: TeamsActivity, timeout: float = 15.0
                        ) -> dict[str, Any]:
        with self._updated:
            if not self._updated.wait_for(lambda: bool(activity.updates), timeout):
                raise AssertionError(f"no PUT of activity {activity.activity_id}")
            return activity.updates[0]

    # -- invokes as the Bot Connector POSTs them ------------------------------------------

    def token(self, *, key: rsa.RSAPrivateKey | None = None, kid: str | None = None,
              **claims: Any) -> str:
        """A Bot Connector JWT (claims override the right ones; None drops one)."""
        now = int(time.time())
        payload: dict[str, Any] = {"iss": ISSUER, "aud": self.app_id, "nbf": now - 5,
                                   "iat": now - 5, "exp": now + 3600,
                                   "serviceUrl": self.service_url}
        payload.update(claims)
        payload = {k: v for k, v in payload.items() if v is not None}
        return jwt.encode(payload, key or self.key, algorithm="RS256",
                          headers={"kid": kid or self.kid})

    def invoke(self, reply_to_id: str, verb: str, aad_object_id: str, *,
               request_id: str | None = None, activity_id: str | None = None,
               token: str | None = None, channel_id: str = "msteams",
               service_url: str | None = None, authorized: bool = True) -> BuiltCallback:
        """A click on ``verb`` (approve/reject) on the card ``reply_to_id`` by the user
        with Entra object id ``aad_object_id``."""
        card = self.activities[reply_to_id].card if reply_to_id in self.activities else None
        data = next((a.get("data", {}) for a in (card or {}).get("actions", [])
                     if a.get("verb") == verb), {})
        if request_id is not None:
            data = {"request_id": request_id}
        activity = {
            "type": "invoke", "name": "adaptiveCard/action",
            "id": activity_id or f"f:{uuid.uuid4().int % 10**19}",
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "channelId": channel_id, "serviceUrl": service_url or self.service_url,
            "from": {"id": f"29:{aad_object_id}", "name": aad_object_id,
                     "aadObjectId": aad_object_id},
            "conversation": {"conversationType": "channel", "tenantId": "tenant-1",
                             "id": f"{self.conversation_id};messageid={reply_to_id}"},
            "recipient": {"id": f"28:{self.app_id}", "name": "hookgate"},
            "replyToId": reply_to_id,
            "value": {"action": {"type": "Action.Execute", "verb": verb, "data": data},
                      "trigger": "manual"},
        }
        headers = {"Content-Type": "application/json"}
        if authorized:
            headers["Authorization"] = f"Bearer {token or self.token()}"
        return BuiltCallback("POST", headers, {}, json.dumps(activity).encode())
