"""Fake platforms' callbacks survive real HTTP into a channel and back.

A minimal callback route (what the server's route does: raw body, lower-cased headers,
query; CallbackRejected becomes its status) stands on loopback, and each fake POSTs (or
GETs) its callbacks to it as the platform would.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hookgate.channels.base import CallbackRejected, CallbackRequest, Channel
from hookgate.channels.registry import create_channel
from tests.fakes.feishu import FakeFeishu
from tests.fakes.server import LoopbackServer
from tests.fakes.slack import FakeSlack
from tests.fakes.wecom import FakeWeCom


def callback_app(channels: dict[str, Channel]) -> Starlette:
    async def receive(request: Request) -> Response:
        channel = channels[request.path_params["channel_id"]]
        incoming = CallbackRequest(
            method=request.method,
            headers={k.lower(): v for k, v in request.headers.items()},
            query=dict(request.query_params),
            body=await request.body(),
        )
        try:
            action = channel.parse_callback(incoming, time.time())
        except CallbackRejected as exc:
            return Response(exc.reason, status_code=exc.status)
        reply = channel.reply(incoming, action, outcome=None, message="seen")
        return Response(reply.body, status_code=reply.status_code, media_type=reply.content_type)

    return Starlette(routes=[Route("/callbacks/{channel_id}", receive, methods=["GET", "POST"])])


@pytest.fixture
def platforms() -> Iterator[tuple[FakeFeishu, FakeSlack, FakeWeCom]]:
    with FakeFeishu() as feishu, FakeSlack() as slack, FakeWeCom() as wecom:
        yield feishu, slack, wecom


async def test_each_platforms_callbacks_pass_through_a_real_http_route(
    platforms: tuple[FakeFeishu, FakeSlack, FakeWeCom],
) -> None:
    feishu, slack, wecom = platforms
    channels = {
        "f": create_channel("f", "feishu", "org", feishu.channel_config()),
        "s": create_channel("s", "slack", "org", slack.channel_config()),
        "w": create_channel("w", "wecom", "org", wecom.channel_config()),
    }
    server = LoopbackServer(callback_app(channels))
    base = server.start()
    try:
        async with httpx.AsyncClient(base_url=base) as client:
            handshake = await feishu.url_verification("c-1", encrypted=True).send(
                client, "/callbacks/f")
            click = await feishu.card_click("r1", "approve").send(client, "/callbacks/f")
            forged = await feishu.card_click("r1", "approve", signing_key="x").send(
                client, "/callbacks/f")
            slack_click = await slack.block_action("r1", "reject").send(client, "/callbacks/s")
            echo = await wecom.echostr_handshake("5927392").send(client, "/callbacks/w")
            wecom_click = await wecom.card_click("r1", "approve").send(client, "/callbacks/w")
            wecom_stale = await wecom.card_click(
                "r1", "approve", timestamp=int(time.time()) - 400).send(client, "/callbacks/w")
    finally:
        server.stop()
        for channel in channels.values():
            await channel.aclose()

    assert handshake.status_code == 200 and handshake.json() == {"challenge": "c-1"}
    assert click.status_code == 200
    assert json.loads(click.content) == {"toast": {"type": "warning", "content": "seen"}}
    assert forged.status_code == 401
    assert (slack_click.status_code, slack_click.content) == (200, b"")
    assert (echo.status_code, echo.content) == (200, b"5927392")
    assert (wecom_click.status_code, wecom_click.content) == (200, b"")
    assert wecom_stale.status_code == 401
