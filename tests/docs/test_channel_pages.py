"""The chat channel pages, as far as they run here: each page's channel and user entries,
with the platform's API replaced by the fake one under tests/fakes (`base_url` and, for
Teams, the sign-in and key URLs; Discord's public key is the fake's: keys each page
shows), checked with `hookgate check`, a secrets key made with the page's command,
`hookgate serve`, a card sent where the page's channel says, a click built and signed as the
platform sends it, posted to the page's callback URL by the page's approver, and the card
rewritten with who decided. The Slack page's refusal of a channel without its signing
secret is checked in the page's words."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from hookgate.channels.teams.cards import card_texts
from tests.docs.samples import DOCS, REPO, blocks
from tests.fakes.discord import FakeDiscord
from tests.fakes.feishu import FakeFeishu, card_text
from tests.fakes.server import BuiltCallback, FakePlatform
from tests.fakes.slack import FakeSlack, block_texts
from tests.fakes.teams import FakeTeams
from tests.fakes.telegram import FakeTelegram
from tests.fakes.wecom import FakeWeCom
from tests.instances import Instance
from tests.loopback_http import HTTP

TOKEN = "dev-token-alice"
CALLBACK = "https://<your-host>/api/channels/<channel_id>/callback"

#: What the pages leave to the reader's own configuration: an org, a tool that needs a
#: person, a model and an agent whose cards go to the page's channel.
REST = """
orgs: [{id: acme, name: ACME}]
tools: [hookgate.examples.purchasing:oa__purchase_pay]
models:
  script:
    type: scripted
    turns:
      - tool_calls: [{name: oa__purchase_pay, args: {amount: 60000, vendor: ACME}}]
      - answer: done
agents:
  - {id: buyer, name: Buyer, org: acme, owner: alice, model: script, instructions: buy,
     tools: [oa__purchase_pay], approval_channel_id: CHANNEL}
"""


@dataclass(frozen=True)
class Platform:
    #: The fake, from the page's channel config (its literal values; secrets are made up).
    fake: Callable[[dict[str, Any]], FakePlatform]
    #: The environment variables the page's config reads, from the fake.
    secrets: Callable[[Any], dict[str, str]]
    #: The card the fake received, once it did.
    card: Callable[[Any], Any]
    #: A click on ``card`` approving ``request_id`` by the person with chat id ``who``.
    click: Callable[[Any, Any, str, str], BuiltCallback]
    #: What the updated card says, once updated (else "").
    decided: Callable[[Any], str]
    chat_key: str
    #: The channel config's keys that point at the fake (or are the fake's own, as a key
    #: pair is), taken from the fake's config; each is named on the page.
    from_fake: tuple[str, ...] = ("base_url",)


def _slack_decided(message: Any) -> str:
    return block_texts(message.blocks or []) if message.updates else ""


def _feishu_decided(message: Any) -> str:
    return card_text(message.content) if message.patches else ""


def _wecom_decided(card: Any) -> str:
    return str(card.updates[0]["button"]) if card.updates else ""


PLATFORMS = {
    "slack.md": Platform(
        fake=lambda c: FakeSlack(bot_token="xoxb-docs", signing_secret="docs-signing-secret",
                                 channel_id=c["channel"]),
        secrets=lambda f: {"SLACK_BOT_TOKEN": f.bot_token,
                           "SLACK_SIGNING_SECRET": f.signing_secret},
        card=lambda f: next(iter(f.messages.values()), None),
        click=lambda f, m, request, who: f.block_action(request, "approve", who,
                                                        message_ts=m.ts),
        decided=_slack_decided, chat_key="slack_user_id"),
    "feishu.md": Platform(
        fake=lambda c: FakeFeishu(app_id=c["app_id"], chat_id=c["chat_id"],
                                  app_secret="docs-app-secret",
                                  verification_token="docs-verification-token",
                                  encrypt_key="docs-encrypt-key"),
        secrets=lambda f: {"FEISHU_APP_SECRET": f.app_secret,
                           "FEISHU_VERIFICATION_TOKEN": f.verification_token,
                           "FEISHU_ENCRYPT_KEY": f.encrypt_key},
        card=lambda f: next(iter(f.messages.values()), None),
        click=lambda f, m, request, who: f.card_click(request, "approve", who,
                                                      message_id=m.message_id),
        decided=_feishu_decided, chat_key="feishu_open_id"),
    "wecom.md": Platform(
        fake=lambda c: FakeWeCom(corp_id=c["corp_id"], agent_id=c["agent_id"],
                                 touser=c["touser"], corp_secret="docs-corp-secret",
                                 token="docsCallbackToken"),
        secrets=lambda f: {"WECOM_APP_SECRET": f.corp_secret,
                           "WECOM_CALLBACK_TOKEN": f.token,
                           "WECOM_ENCODING_AES_KEY": f.encoding_aes_key},
        card=lambda f: next(iter(f.cards.values()), None),
        click=lambda f, card, request, who: f.card_click(request, "approve", who,
                                                         task_id=card.task_id),
        decided=_wecom_decided, chat_key="wecom_userid"),
    "telegram.md": Platform(
        fake=lambda c: FakeTelegram(chat_id=int(c["chat_id"])),
        secrets=lambda f: {"TELEGRAM_BOT_TOKEN": f.bot_token,
                           "TELEGRAM_SECRET_TOKEN": f.secret_token},
        card=lambda f: next(iter(f.messages.values()), None),
        click=lambda f, message, request, who: f.click(message, "Approve", int(who)),
        decided=lambda message: message.text if message.edits else "",
        chat_key="telegram_user_id"),
    "teams.md": Platform(
        fake=lambda c: FakeTeams(app_id=c["app_id"], conversation_id=c["conversation_id"],
                                 app_password="docs-client-secret"),
        secrets=lambda f: {"TEAMS_APP_PASSWORD": f.app_password},
        card=lambda f: next(iter(f.activities.values()), None),
        click=lambda f, activity, request, who: f.invoke(activity.activity_id, "approve",
                                                         who),
        decided=lambda activity: card_texts(activity.card) if activity.updates else "",
        chat_key="teams_aad_object_id",
        from_fake=("base_url", "openid_metadata_url", "login_url")),
    "discord.md": Platform(
        fake=lambda c: FakeDiscord(application_id=c["application_id"],
                                   channel_id=c["channel_id"], bot_token="docs.bot-token"),
        secrets=lambda f: {"DISCORD_BOT_TOKEN": f.bot_token},
        card=lambda f: next(iter(f.messages.values()), None),
        click=lambda f, message, request, who: f.click(message, "Approve", who),
        decided=lambda message: message.content if message.edits else "",
        chat_key="discord_user_id", from_fake=("base_url", "public_key")),
}


def flat(text: str) -> str:
    return " ".join(text.split())


def eventually(read: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if value := read():
            return value
        time.sleep(0.1)
    raise AssertionError(f"never saw {what}")


def hookgate(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def config_text(page_config: dict[str, Any], channel_id: str) -> str:
    return yaml.safe_dump(page_config) + REST.replace("CHANNEL", channel_id)


@pytest.mark.timeout(600)  # several real processes on a shared machine
@pytest.mark.parametrize("name", sorted(PLATFORMS))
def test_a_channel_page_runs_against_the_fake_platform(name: str, tmp_path: Path) -> None:
    platform = PLATFORMS[name]
    path = DOCS / "channels" / name
    page = blocks(path)
    text = path.read_text(encoding="utf-8")
    yamls = [yaml.safe_load(b.code) for b in page if b.lang == "yaml"]
    [declared] = [y for y in yamls if "channels" in y]
    [users] = [y["users"] for y in yamls if "users" in y]
    [channel] = declared["channels"]
    assert CALLBACK in [b.code.strip() for b in blocks(DOCS / "channels" / "README.md")
                        if b.lang == "text"]
    [user] = users
    user.update(token=TOKEN, admin=True)
    who = user["chat"][platform.chat_key]

    with platform.fake(channel["config"]) as fake:
        # The platform's API is the fake: `base_url` (and the like), which each page names.
        for key in platform.from_fake:
            assert f"`{key}`" in text or f"{key}:" in text, key
            channel["config"][key] = fake.channel_config()[key]
        env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **platform.secrets(fake),
               "PYTHONPATH": os.pathsep.join([str(REPO / "src"),
                                              os.environ.get("PYTHONPATH", "")])}
        page_config = {**declared, "users": users}
        page_config.setdefault("server", {"public_url": "https://gate.example.com"})
        config = tmp_path / "hookgate.yaml"

        if name == "slack.md":  # without the signing secret: refused in the page's words
            unsigned = {**channel, "config": {k: v for k, v in channel["config"].items()
                                              if k != "signing_secret"}}
            config.write_text(config_text({**page_config, "channels": [unsigned]},
                                          channel["id"]), encoding="utf-8")
            refused = hookgate("check", "--config", str(config), env=env)
            quoted = re.search(r"`(channels\[0\]\.config: invalid slack channel: [^`]+)`",
                               text, re.S)
            assert quoted and refused.returncode == 1
            assert flat(quoted.group(1)) in flat(refused.stdout + refused.stderr), refused

        # The secrets key, made with the page's command.
        [make_key] = [b.code for b in page if "generate-key" in b.code]
        made = subprocess.run(
            ["bash", "-c", f'hookgate() {{ "{sys.executable}" -m hookgate.cli.main "$@"; }}\n'
                           f'set -e\n{make_key}printf %s "$HOOKGATE_SECRETS_KEY"'],
            env=env, capture_output=True, text=True, timeout=60)
        assert made.returncode == 0 and made.stdout, made.stderr
        env["HOOKGATE_SECRETS_KEY"] = made.stdout

        config.write_text(config_text(page_config, channel["id"]), encoding="utf-8")
        checked = hookgate("check", "--config", str(config), env=env)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        server = Instance("serve", config, tmp_path, env={
            k: env[k] for k in [*platform.secrets(fake), "HOOKGATE_SECRETS_KEY"]})
        server.spawn()
        try:
            server.wait_up()
            api = httpx.Client(base_url=server.url, timeout=20,
                               headers={"Authorization": f"Bearer {TOKEN}"})
            run_id = api.post("/api/runs", json={"agent_id": "buyer",
                                                 "message": "pay ACME"}).json()["run_id"]
            card = eventually(lambda: platform.card(fake), "the approval card")
            [request] = api.get("/api/confirmations", params={"status": "pending"}).json()
            click = platform.click(fake, card, request["id"], who)
            url = CALLBACK.replace("https://<your-host>", server.url).replace(
                "<channel_id>", channel["id"])
            answer = HTTP.post(url, headers=click.headers, params=click.query,
                               content=click.body, timeout=20)
            assert answer.status_code == 200, answer.text

            eventually(lambda: api.get(f"/api/runs/{run_id}").json()["status"] == "completed",
                       "the run completed")
            said = eventually(lambda: platform.decided(card), "the card updated")
            assert "Approved by alice" in said, said
            record = api.get(f"/api/confirmations/{request['id']}").json()
            platform_name = name.removesuffix(".md")
            assert record["decision"]["channel_identity"] == f"{platform_name}:{who}"
            api.close()
        finally:
            server.stop()
    assert fake.violations == []
