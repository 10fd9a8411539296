"""Email end to end: a real server on loopback sending through a real SMTP server on loopback
(aiosmtpd). A link's GET shows a confirmation page and decides nothing (what a mail scanner
does); the page's POST decides once, as the recipient the link was sent to; forged, foreign,
expired and used links decide nothing; every recipient hears the outcome."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from hookgate.channels import signed_links
from hookgate.runtime.deployment import ChannelSpec
from tests.channels.world import API_TOKEN, EMAIL, Scene, callback_url, waiting_run
from tests.fakes.smtp import SmtpServer, body

pytestmark = pytest.mark.both_databases

SECRET = "test-email-link-secret-0123456789abcdef"


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    with SmtpServer() as server:
        yield server


def mail_channel(smtp: SmtpServer, **overrides: Any) -> list[ChannelSpec]:
    config: dict[str, Any] = {
        "smtp_host": "127.0.0.1", "smtp_port": smtp.port, "starttls": False,
        "from_address": "hookgate@gate.example", "to": [EMAIL["alice"], EMAIL["bob"]],
        "link_secret": SECRET,
        "callback_url": "https://gate.example/api/channels/ops-mail/callback",
        **overrides}
    return [ChannelSpec("ops-mail", "email", "acme", config)]


def links(mail_text: str) -> dict[str, str]:
    """{"Approve": token, "Reject": token} of a mail."""
    found = dict(re.findall(r"^(Approve|Reject):\s+(\S+)$", mail_text, re.M))
    return {k: parse_qs(urlsplit(v).query)["t"][0] for k, v in found.items()}


async def open_link(scene: Scene, token: str) -> httpx.Response:
    """What a browser, or a mail scanner, does with the link."""
    return await scene.client.get(callback_url("ops-mail"), params={"t": token})


async def confirm(scene: Scene, token: str) -> httpx.Response:
    """The confirmation page's form, sent."""
    return await scene.client.post(callback_url("ops-mail"), data={"t": token})


async def test_opening_a_link_decides_nothing_and_only_the_confirmation_decides_once(
        database_url: str, smtp: SmtpServer, secrets_key: str) -> None:
    async with waiting_run(database_url, mail_channel(smtp), "ops-mail",
                           lambda: len(smtp.inbox.mails) >= 2) as scene:
        mail = body(smtp.inbox.to(EMAIL["alice"])[0])
        assert "wire_transfer" in mail and "ACME GMBH" in mail and API_TOKEN not in mail
        alice = links(mail)
        assert links(body(smtp.inbox.to(EMAIL["bob"])[0]))["Approve"] != alice["Approve"]

        for _ in range(3):  # a scanner, a preview, the person: each only sees the page
            page = await open_link(scene, alice["Approve"])
            assert page.status_code == 200 and "text/html" in page.headers["content-type"]
            assert '<form method="post">' in page.text
        await scene.untouched()

        done = await confirm(scene, alice["Approve"])
        assert done.status_code == 200 and "Approved" in done.text
        assert (await scene.finished())["status"] == "completed"
        assert len(scene.bank.transfers) == 1
        record = await scene.record()
        assert record["decision"]["channel_identity"] == f"email:{EMAIL['alice']}"
        assert record["decision"]["via"] == "email"

        assert (await confirm(scene, alice["Approve"])).status_code == 401  # used
        late = await confirm(scene, alice["Reject"])
        assert "already" in late.text and (await scene.record())["status"] == "approved"
        for who in ("alice", "bob"):  # each recipient hears the outcome, in the same thread
            await asyncio.to_thread(
                smtp.inbox.wait, lambda w=who: len(smtp.inbox.to(EMAIL[w])) >= 2, who)
            decided = smtp.inbox.to(EMAIL[who])
            assert decided[1]["Subject"] == "Approved: wire_transfer"
            assert "Approved by alice via email" in body(decided[1])
            assert decided[1]["In-Reply-To"] == decided[0]["Message-ID"]


async def test_forged_foreign_expired_and_ineligible_links_decide_nothing(
        database_url: str, smtp: SmtpServer, secrets_key: str) -> None:
    async with waiting_run(database_url, mail_channel(smtp), "ops-mail",
                           lambda: len(smtp.inbox.mails) >= 2) as scene:
        alice = links(body(smtp.inbox.to(EMAIL["alice"])[0]))
        bob = links(body(smtp.inbox.to(EMAIL["bob"])[0]))
        payload, _, tag = alice["Approve"].partition(".")
        rid, now = scene.request_id, int(time.time())
        refused = {
            "tampered": payload[:-2] + "AA." + tag,
            "wrong secret": signed_links.mint("x" * 40, "ops-mail", rid, "approve",
                                              EMAIL["alice"], now + 600),
            "another channel": signed_links.mint(SECRET, "sales-mail", rid, "approve",
                                                 EMAIL["alice"], now + 600),
            "expired": signed_links.mint(SECRET, "ops-mail", rid, "approve",
                                         EMAIL["alice"], now - 1),
            "not a recipient": signed_links.mint(SECRET, "ops-mail", rid, "approve",
                                                 EMAIL["mallory"], now + 600),
        }
        for what, token in refused.items():
            assert (await open_link(scene, token)).status_code == 401, what
            assert (await confirm(scene, token)).status_code == 401, what
        not_initiator = await confirm(scene, bob["Approve"])
        assert "not allowed" in not_initiator.text
        await scene.untouched()
        assert len(smtp.inbox.mails) == 2

        done = await confirm(scene, alice["Reject"])
        assert "Rejected" in done.text
        assert (await scene.finished())["status"] == "completed"
        assert scene.bank.transfers == []


async def test_a_decision_in_the_inbox_is_mailed_to_every_recipient(
        database_url: str, smtp: SmtpServer, secrets_key: str) -> None:
    async with waiting_run(database_url, mail_channel(smtp), "ops-mail",
                           lambda: len(smtp.inbox.mails) >= 2) as scene:
        await scene.decide_in_inbox("reject", "not this quarter")
        await asyncio.to_thread(smtp.inbox.wait, lambda: len(smtp.inbox.mails) >= 4,
                                "the outcome mails")
        outcome = [m for m in smtp.inbox.mails if m["Subject"] == "Rejected: wire_transfer"]
        assert {m["To"] for m in outcome} == {EMAIL["alice"], EMAIL["bob"]}
        assert "Rejected by alice via the web inbox" in body(outcome[0])
        assert "Reason: not this quarter" in body(outcome[0])
