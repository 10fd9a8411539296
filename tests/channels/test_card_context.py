"""The approver's context on each platform's card, within that platform's limits: a huge
user message or many reasons never push a card past what the platform accepts, and the
exact arguments are shown unchanged beside the grouped numbers."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hookgate.channels.base import CardOutcome
from hookgate.channels.feishu import cards as feishu
from hookgate.channels.masking import DEFAULT_SECRET_PATTERNS
from hookgate.channels.slack import blocks as slack
from hookgate.channels.wecom import cards as wecom
from tests.channels.conftest import approval_card

NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
CONTEXT = {
    "user_message": "Pay ACME GmbH the invoice 2024-117",
    "tool_description": "Send money to a vendor.",
    "reasons": [{"kind": "tool_rule", "text": "the tool's rule: transfers above 1,000"},
                {"kind": "hook_ask", "hook": "vendor-watch", "text": "hook 'vendor-watch' "
                 "answered ask: new bank account"}],
}
HUGE = {"user_message": "x" * 50_000, "tool_description": "d" * 10_000,
        "reasons": [{"kind": "hook_ask", "text": "r" * 5_000}] * 30}


def _texts(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def test_feishu_shows_the_context_and_the_numbers_beside_the_exact_arguments() -> None:
    card = feishu.approval_card(approval_card(context=CONTEXT), now=NOW,
                                patterns=DEFAULT_SECRET_PATTERNS)
    text = _texts(card)
    for line in ("User asked: Pay ACME GmbH the invoice 2024-117",
                 "What the tool does: Send money to a vendor.",
                 "Why approval is needed: the tool's rule: transfers above 1,000",
                 "Why approval is needed: hook 'vendor-watch' answered ask: new bank account",
                 "Numbers: amount_eur = 1,200"):
        assert line in text
    assert '\\"amount_eur\\": 1200' in text  # the exact value, not the grouped one
    # Context goes in plain_text only, never markdown (it may come from anyone).
    assert all("User asked" not in e.get("content", "") for e in card["body"]["elements"]
               if e.get("tag") == "markdown")
    big = feishu.approval_card(approval_card(context=HUGE), now=NOW,
                               patterns=DEFAULT_SECRET_PATTERNS)
    assert len(_texts(big).encode()) < 30_000  # Feishu refuses cards over 30 KB


def test_slack_sections_stay_within_3000_characters_with_any_context() -> None:
    blocks = slack.approval_blocks(approval_card(context=CONTEXT), now=NOW,
                                   patterns=DEFAULT_SECRET_PATTERNS)
    text = _texts(blocks)
    assert "User asked: Pay ACME GmbH" in text and "Numbers: amount_eur = 1,200" in text
    big = slack.approval_blocks(approval_card(context=HUGE), now=NOW,
                                patterns=DEFAULT_SECRET_PATTERNS)
    assert all(len(b["text"]["text"]) <= 3000 for b in big if b["type"] == "section")
    assert len(big) <= 50


def test_wecom_fits_the_context_in_its_small_card() -> None:
    card = wecom.approval_card(approval_card(context=CONTEXT, args={"amount": 60000}), now=NOW,
                               patterns=DEFAULT_SECRET_PATTERNS)
    assert card["main_title"]["desc"] == "User asked: Pay ACME GmbH the invoice 2024-…"
    assert card["sub_title_text"] == '{"amount": 60000}\namount = 60,000'
    rows = {r["keyname"]: r["value"] for r in card["horizontal_content_list"]}
    assert rows["Why"].startswith("the tool's rule:")
    big = wecom.approval_card(approval_card(context=HUGE), now=NOW,
                              patterns=DEFAULT_SECRET_PATTERNS)
    assert len(big["horizontal_content_list"]) <= 6
    assert len(big["main_title"]["desc"]) <= wecom.DESC_CHARS
    assert all(len(r["value"]) <= wecom.VALUE_CHARS for r in big["horizontal_content_list"])


def test_a_card_without_context_reads_as_before() -> None:
    card = feishu.approval_card(approval_card(args={"n": 3}), now=NOW,
                                patterns=DEFAULT_SECRET_PATTERNS)
    assert "User asked" not in _texts(card) and "Numbers" not in _texts(card)
    assert wecom.approval_card(approval_card(), now=NOW, patterns=())["main_title"]["desc"] \
        == "Buyer (buyer) wants to run wire_transfer"


def test_the_decided_state_names_the_channel_the_decision_came_through() -> None:
    outcome = CardOutcome("req-1", "rejected", "alice", NOW, "no", via="wecom")
    assert "Rejected by alice via WeCom at 2025-03-01 09:00 UTC" in _texts(
        feishu.decided_card(outcome, "wire_transfer"))
    assert "Rejected by alice via WeCom" in _texts(slack.decided_blocks(outcome, "x"))
    expired = CardOutcome("req-1", "expired", None, NOW, "no decision")
    assert "Expired at 2025-03-01" in _texts(slack.decided_blocks(expired, "x"))
