"""TeamsChannel: approval Adaptive Cards in one Teams channel, through the Bot Connector.

Cards go out as activities (``POST v3/conversations/{id}/activities``) with a token from
Microsoft Entra ID, and are replaced (``PUT .../activities/{activity id}``) after the
decision, wherever it was made. A click on Approve/Reject (``Action.Execute``) arrives as an
``adaptiveCard/action`` invoke whose Bot Connector JWT is checked (connector_auth.py); the
invoke's answer is the refreshed card, or a message when nothing was decided.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

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
from hookgate.channels.payloads import json_object, member, string
from hookgate.channels.teams import connector_auth
from hookgate.channels.teams.cards import (
    CONTENT_TYPE,
    approval_card,
    attachment,
    decided_card,
)
from hookgate.channels.teams.config import TeamsSettings
from hookgate.channels.tokens import AccessTokenCache
from hookgate.channels.verification import check_size
from hookgate.tls import client_context

DECISIONS = ("approve", "reject")
INVOKE_NAME = "adaptiveCard/action"
BOT_CONNECTOR_SCOPE = "https://api.botframework.com/.default"
TOKEN_MARGIN_S = 300.0


class TeamsChannel(Channel):
    type = "teams"

    def __init__(self, channel_id: str, org_id: str, config: dict[str, Any]) -> None:
        super().__init__(channel_id, org_id, config)
        self.settings = TeamsSettings.from_config(config)
        self._sender = PlatformSender("teams", self.settings.base_url,
                                      policy=self.settings.retry)
        self._tokens = AccessTokenCache(self._fetch_token, margin=TOKEN_MARGIN_S)
        self._keys = connector_auth.ConnectorKeys(self.settings.openid_metadata_url)
        self._key_client = httpx.AsyncClient(timeout=self.settings.retry.request_timeout,
                                             verify=client_context())

    @staticmethod
    def validate_config(config: Mapping[str, Any]) -> None:
        TeamsSettings.from_config(config)

    # -- sending ---------------------------------------------------------------------------

    async def _fetch_token(self) -> tuple[str, float]:
        url = f"{self.settings.login_url}/{quote(self.settings.tenant_id)}/oauth2/v2.0/token"
        response = await self._sender.request("POST", url, data={
            "grant_type": "client_credentials", "client_id": self.settings.app_id,
            "client_secret": self.settings.app_password, "scope": BOT_CONNECTOR_SCOPE})
        data = json_body(response)
        token, lifetime = data.get("access_token"), data.get("expires_in")
        if response.status_code != 200 or not isinstance(token, str) or not token:
            raise self._sender.refused("POST", "oauth2/v2.0/token", response,
                                       f"error {data.get('error')!r}")
        return token, float(lifetime) if isinstance(lifetime, int | float) else 3600.0

    async def _call(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        async def attempt(token: str) -> httpx.Response:
            return await self._sender.request(method, path, json=body, headers={
                "Authorization": f"Bearer {token}"})

        response = await self._tokens.call(attempt, lambda r: r.status_code == 401)
        if response.status_code not in (200, 201, 202):
            error = member(json_body(response), "error")
            raise self._sender.refused(method, path, response, f"error {error.get('code')!r}")
        return json_body(response)

    def _activities(self) -> str:
        return f"v3/conversations/{quote(self.settings.conversation_id, safe='')}/activities"

    async def send_card(self, card: ApprovalCard) -> DeliveredCard:
        content = approval_card(card, now=datetime.now(UTC),
                                patterns=self.settings.mask_patterns)
        data = await self._call("POST", self._activities(),
                                {"type": "message", "attachments": [attachment(content)]})
        activity_id = string(data, "id")
        if activity_id is None:
            raise DeliveryError("teams: the Bot Connector took the card without an activity "
                                "id", platform="teams", endpoint="POST activities",
                                body=json.dumps(data)[:500])
        return DeliveredCard(self.id, {"activity_id": activity_id, "tool": card.tool_name})

    async def update_card(self, delivered: DeliveredCard, outcome: CardOutcome) -> None:
        activity_id = string(delivered.ref, "activity_id")
        if activity_id is None:
            raise DeliveryError(f"teams: cannot update the card of request "
                                f"{outcome.request_id}: its ref has no activity_id",
                                platform="teams")
        content = decided_card(outcome, string(delivered.ref, "tool"),
                               patterns=self.settings.mask_patterns)
        await self._call("PUT", f"{self._activities()}/{quote(activity_id, safe='')}",
                         {"type": "message", "id": activity_id,
                          "attachments": [attachment(content)]})

    async def notify(self, text: str) -> None:
        await self._call("POST", self._activities(), {"type": "message", "text": text,
                                                      "textFormat": "plain"})

    async def aclose(self) -> None:
        await self._sender.aclose()
        await self._key_client.aclose()

    # -- callbacks -------------------------------------------------------------------------

    async def prepare_callback(self, request: CallbackRequest) -> None:
        """Fetch the Connector's signing keys when they are old or the token names a key
        not seen yet (at most once a minute); without keys every invoke is refused."""
        token = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        kid = connector_auth.token_kid(token) if token else None
        now = time.monotonic()
        if self._keys.needs_refresh(kid, now):
            try:
                await self._keys.refresh(self._key_client, now)
            except connector_auth.KeysUnavailable as exc:
                raise CallbackRejected(503, str(exc)) from None

    def parse_callback(self, request: CallbackRequest, now: float) -> CallbackAction:
        check_size(request)
        if request.method.upper() != "POST":
            raise CallbackRejected(400, "Bot Connector activities are POSTs")
        token = connector_auth.bearer_token(request.headers)
        activity = json_object(request.body, 400, "activity")
        connector_auth.verify(token, self._keys, app_id=self.settings.app_id,
                              issuer=self.settings.issuer,
                              channel_id=string(activity, "channelId"),
                              service_url=string(activity, "serviceUrl"))
        if activity.get("type") != "invoke" or activity.get("name") != INVOKE_NAME:
            return CallbackAction(kind="ignored")
        action = member(member(activity, "value"), "action")
        verb = action.get("verb")
        if action.get("type") != "Action.Execute" or verb not in DECISIONS:
            return CallbackAction(kind="ignored", ref={"invoke": True})
        request_id = string(member(action, "data"), "request_id")
        aad_object_id = string(member(activity, "from"), "aadObjectId")
        activity_id = string(activity, "id")
        if request_id is None or aad_object_id is None or activity_id is None:
            raise CallbackRejected(400, "adaptiveCard/action without data.request_id, "
                                        "from.aadObjectId and id")
        return CallbackAction(
            kind="decision", request_id=request_id,
            decision="approve" if verb == "approve" else "reject",
            platform_user_id=aad_object_id,
            dedupe_key=f"activity:{activity_id}",
            ref={"invoke": True, "reply_to_id": string(activity, "replyToId")})

    def reply(
        self,
        request: CallbackRequest,
        action: CallbackAction,
        *,
        outcome: CardOutcome | None,
        message: str,
    ) -> CallbackReply:
        """The invoke's answer: the decided card in place of the clicked one, or a message
        (the card stays as it is) when nothing was decided."""
        if not action.ref.get("invoke"):
            return CallbackReply.empty()
        if outcome is not None:
            body: dict[str, Any] = {"statusCode": 200, "type": CONTENT_TYPE,
                                    "value": decided_card(outcome, None,
                                                          patterns=self.settings.mask_patterns)}
        else:
            body = {"statusCode": 200, "type": "application/vnd.microsoft.activity.message",
                    "value": message or "Nothing to do"}
        return CallbackReply(body=json.dumps(body).encode())
