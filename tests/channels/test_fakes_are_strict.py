"""The fakes refuse what the real platforms refuse; otherwise passing tests would prove little."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.fakes.feishu import MESSAGES_PATH, TOKEN_PATH, FakeFeishu
from tests.fakes.slack import FakeSlack
from tests.fakes.wecom import SEND_PATH, FakeWeCom

BUTTON = {"tag": "button", "text": {"tag": "plain_text", "content": "Approve"},
          "behaviors": [{"type": "callback", "value": {"req": "r1", "decision": "approve"}}]}


async def feishu_send(fake: FakeFeishu, content: Any) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=fake.url) as client:
        token = (await client.post(TOKEN_PATH, json={"app_id": fake.app_id,
                                                     "app_secret": fake.app_secret})
                 ).json()["tenant_access_token"]
        response = await client.post(
            MESSAGES_PATH, params={"receive_id_type": "chat_id"},
            headers={"Authorization": f"Bearer {token}"},
            json={"receive_id": fake.chat_id, "msg_type": "interactive", "content": content},
        )
        return dict(response.json())


async def test_fake_feishu_refuses_cards_that_feishu_would_refuse(feishu: FakeFeishu) -> None:
    good = {"schema": "2.0", "body": {"elements": [BUTTON]}}
    assert (await feishu_send(feishu, json.dumps(good)))["code"] == 0

    bad = {
        "content as an object": good,
        "a JSON 1.0 card": json.dumps({"elements": [{"tag": "action", "actions": [BUTTON]}]}),
        "the 1.0 action module in 2.0": json.dumps(
            {"schema": "2.0", "body": {"elements": [{"tag": "action", "actions": [BUTTON]}]}}),
        "an unknown property": json.dumps(
            {"schema": "2.0", "body": {"elements": [{**BUTTON, "colour": "red"}]}}),
        "a button without behaviors": json.dumps(
            {"schema": "2.0", "body": {"elements": [{k: v for k, v in BUTTON.items()
                                                     if k != "behaviors"}]}}),
    }
    codes = {name: (await feishu_send(feishu, content))["code"] for name, content in bad.items()}
    assert codes == dict.fromkeys(bad, 99992402)
    assert len(feishu.violations) == len(bad)


async def test_fake_slack_refuses_messages_without_fallback_text_or_with_long_sections(
    slack: FakeSlack,
) -> None:
    async with httpx.AsyncClient(base_url=slack.url) as client:
        headers = {"Authorization": f"Bearer {slack.bot_token}"}
        no_text = await client.post("/api/chat.postMessage", headers=headers,
                                    json={"channel": slack.channel_id, "blocks": []})
        too_long = await client.post("/api/chat.postMessage", headers=headers, json={
            "channel": slack.channel_id, "text": "t",
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}]})
    assert no_text.json()["ok"] is False and too_long.json()["ok"] is False
    assert len(slack.violations) == 2


async def test_fake_wecom_refuses_task_ids_outside_its_alphabet(wecom: FakeWeCom) -> None:
    async with httpx.AsyncClient(base_url=wecom.url) as client:
        token = (await client.get("/cgi-bin/gettoken", params={
            "corpid": wecom.corp_id, "corpsecret": wecom.corp_secret})).json()["access_token"]
        response = await client.post(SEND_PATH, params={"access_token": token}, json={
            "touser": wecom.touser, "msgtype": "template_card", "agentid": wecom.agent_id,
            "template_card": {"card_type": "button_interaction", "main_title": {"title": "t"},
                              "task_id": "req/1", "button_list": [{"text": "ok", "key": "k"}]}})
    assert response.json()["errcode"] != 0
    assert "task_id" in wecom.violations[0]
