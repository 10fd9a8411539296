"""``hookgate check`` refuses a channel that could not verify its callbacks, naming the
missing secret, and accepts ``channel_notify`` and ``notify_on_completion`` on an agent."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hookgate.channels.notify_tool import UNBOUND_CHANNEL_NOTIFY
from hookgate.config import ConfigError, parse_config
from tests.channels.cli import hookgate

BASE = """
orgs: [{id: acme}]
users: [{id: alice, org: acme, chat: {feishu_open_id: ou_alice}}]
models:
  script: {type: scripted, turns: [{answer: hi}]}
agents:
  - {id: buyer, org: acme, owner: alice, model: script, tools: [channel_notify],
     notify_on_completion: true}
channels:
  - id: ops
    org: acme
"""

FEISHU = "{app_id: cli_1, app_secret: s, chat_id: oc_1, verification_token: v, encrypt_key: e}"
SLACK = "{bot_token: xoxb-1, channel: C1, signing_secret: s}"
WECOM = ("{corp_id: ww1, corp_secret: s, agent_id: 1000002, touser: alice, token: t, "
         "encoding_aes_key: 6qkdMrq68nTKduznJYO1A37W2oEgpkMUvkttRToqhUt}")


def config_file(tmp_path: Path, channel_type: str, config: str) -> Path:
    path = tmp_path / "hookgate.yaml"
    path.write_text(textwrap.dedent(BASE) + f"    type: {channel_type}\n"
                    f"    config: {config}\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(("channel_type", "config", "missing"), [
    ("feishu", FEISHU.replace(", encrypt_key: e", ""), "encrypt_key"),
    ("feishu", FEISHU.replace(", verification_token: v", ""), "verification_token"),
    ("slack", SLACK.replace(", signing_secret: s", ""), "signing_secret"),
    ("wecom", WECOM.replace(", token: t", ""), "token"),
    ("wecom", WECOM.split(", encoding_aes_key")[0] + "}", "encoding_aes_key"),
])
def test_a_channel_without_its_verification_secret_is_refused_by_check(
        tmp_path: Path, channel_type: str, config: str, missing: str) -> None:
    done = hookgate("check", "--config", str(config_file(tmp_path, channel_type, config)))

    assert done.returncode == 1, done.stdout
    assert "channels[0].config" in done.stderr
    assert f"config is missing '{missing}'" in done.stderr


@pytest.mark.parametrize(("channel_type", "config"),
                         [("feishu", FEISHU), ("slack", SLACK), ("wecom", WECOM)])
def test_a_complete_channel_and_channel_notify_pass_check(
        tmp_path: Path, channel_type: str, config: str) -> None:
    done = hookgate("check", "--config", str(config_file(tmp_path, channel_type, config)))

    assert done.returncode == 0, done.stderr
    assert "tools channel_notify" in done.stdout
    assert "ok: 1 agent(s), 1 tool(s), 1 model(s), 1 channel(s)" in done.stdout


def test_channel_notify_needs_no_tools_entry_and_the_agent_keeps_its_options() -> None:
    config = parse_config(textwrap.dedent(BASE) + f"    type: slack\n    config: {SLACK}\n")

    buyer = config.build_agent("buyer")

    assert buyer.tools == [UNBOUND_CHANNEL_NOTIFY]
    assert buyer.notify_on_completion is True


def test_an_unknown_tool_is_still_refused_and_channel_notify_is_not_offered_unasked() -> None:
    text = (textwrap.dedent(BASE).replace("tools: [channel_notify]", "tools: [chanel_notify]")
            + f"    type: slack\n    config: {SLACK}\n")

    with pytest.raises(ConfigError, match=r"unknown tool 'chanel_notify' \(configured tools: "
                                        r"none\)"):
        parse_config(text)


SEVERAL = """
orgs: [{id: acme}, {id: other}]
users: [{id: alice, org: acme}]
models:
  script: {type: scripted, turns: [{answer: hi}]}
agents:
  - {id: buyer, org: acme, owner: alice, model: script,
     approval_channel_id: ops-slack, approval_channel_ids: %s}
channels:
  - {id: ops-slack, type: slack, org: acme, config: %s}
  - {id: ops-feishu, type: feishu, org: acme, config: %s}
  - {id: their-slack, type: slack, org: other, config: %s}
"""


def several(channel_ids: str) -> str:
    return textwrap.dedent(SEVERAL) % (channel_ids, SLACK, FEISHU, SLACK)


def test_an_agent_names_several_approval_channels_in_order() -> None:
    buyer = parse_config(several("[ops-feishu, ops-slack]")).build_agent("buyer")

    assert (buyer.approval_channel_id, buyer.approval_channel_ids) == (
        "ops-slack", ("ops-feishu", "ops-slack"))


@pytest.mark.parametrize(("channel_ids", "message"), [
    ("[ops-feishu, nope]", "approval_channel_ids[1]: unknown channel 'nope'"),
    ("[their-slack]", "approval_channel_ids[0]: channel 'their-slack' belongs to org 'other'"),
])
def test_an_approval_channel_that_could_not_reach_the_agents_org_is_refused_at_load(
        channel_ids: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(several(channel_ids))
    assert message in str(info.value)
