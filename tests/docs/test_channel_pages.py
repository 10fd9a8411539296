"""The Slack channel page, as far as it runs here: its channel and user entries, with Slack's
Web API replaced by the fake one under tests/fakes (`base_url`, the key the page shows for
it), checked with `hookgate check` (which quotes the page's refusal when the signing secret
is missing), a secrets key made with the page's command, `hookgate serve`, a card posted to
the page's channel, a click signed as Slack signs it sent to the page's callback URL, and the
card rewritten with who decided."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.docs.samples import DOCS, REPO, blocks
from tests.fakes.slack import FakeSlack, block_texts
from tests.instances import Instance

PAGE = DOCS / "channels" / "slack.md"
TOKEN = "dev-token-alice"

#: What the page leaves to the reader's own configuration: an org, a tool that needs a
#: person, a model and an agent whose cards go to the page's channel.
REST = """
server: {public_url: https://gate.example.com}
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
     tools: [oa__purchase_pay], approval_channel_id: ops-slack}
"""


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


@pytest.mark.timeout(600)  # several real processes on a shared machine
def test_the_slack_page_runs_against_the_fake_slack(tmp_path: Path) -> None:
    page = blocks(PAGE)
    text = PAGE.read_text(encoding="utf-8")
    yamls = [yaml.safe_load(b.code) for b in page if b.lang == "yaml"]
    [channels] = [y["channels"] for y in yamls if "channels" in y]
    [users] = [y["users"] for y in yamls if "users" in y]
    [channel] = channels
    assert channel["config"]["signing_secret"] == "${SLACK_SIGNING_SECRET}"
    [callback] = [b.code.strip() for b in page if b.lang == "text"]
    assert callback == "https://<your-host>/api/channels/<channel_id>/callback"
    [user] = users
    user.update(token=TOKEN, admin=True)

    with FakeSlack(bot_token="xoxb-docs", signing_secret="docs-signing-secret",
                   channel_id=channel["config"]["channel"]) as fake:
        channel["config"]["base_url"] = fake.url + "/api/"  # the page's commented default
        env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1",
               "SLACK_BOT_TOKEN": fake.bot_token, "SLACK_SIGNING_SECRET": fake.signing_secret,
               "PYTHONPATH": os.pathsep.join([str(REPO / "src"),
                                              os.environ.get("PYTHONPATH", "")])}
        config = tmp_path / "hookgate.yaml"

        # Without the signing secret the file is refused, in the page's words.
        unsigned = {**channel, "config": {k: v for k, v in channel["config"].items()
                                          if k != "signing_secret"}}
        config.write_text(yaml.safe_dump({"channels": [unsigned], "users": users})
                          + REST, encoding="utf-8")
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

        config.write_text(yaml.safe_dump({"channels": channels, "users": users}) + REST,
                          encoding="utf-8")
        checked = hookgate("check", "--config", str(config), env=env)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        server = Instance("serve", config, tmp_path, env={
            k: env[k] for k in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET",
                                "HOOKGATE_SECRETS_KEY")})
        server.spawn()
        try:
            server.wait_up()
            api = httpx.Client(base_url=server.url, timeout=20,
                               headers={"Authorization": f"Bearer {TOKEN}"})
            run_id = api.post("/api/runs", json={"agent_id": "buyer",
                                                 "message": "pay ACME"}).json()["run_id"]
            message = eventually(lambda: next(iter(fake.messages.values()), None),
                                 "the approval message in Slack")
            assert message.channel == channel["config"]["channel"]
            [request] = api.get("/api/confirmations", params={"status": "pending"}).json()
            click = fake.block_action(request["id"], "approve", user["chat"]["slack_user_id"],
                                      message_ts=message.ts)
            url = callback.replace("https://<your-host>", server.url).replace(
                "<channel_id>", channel["id"])
            answer = httpx.post(url, headers=click.headers, content=click.body, timeout=20)
            assert (answer.status_code, answer.content) == (200, b"")  # Slack's ack

            eventually(lambda: api.get(f"/api/runs/{run_id}").json()["status"] == "completed",
                       "the run completed")
            eventually(lambda: message.updates, "chat.update")
            assert "Approved by alice via Slack" in block_texts(message.blocks or [])
            record = api.get(f"/api/confirmations/{request['id']}").json()
            assert record["decision"]["channel_identity"] == "slack:U0123ABCD"
            api.close()
        finally:
            server.stop()
    assert fake.violations == []
