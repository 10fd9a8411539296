"""The mail's text and the two small HTML pages of an email decision: the confirmation a
link opens (GET: decides nothing, so a scanner that opens links decides nothing) and the
result after its form is sent (POST)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from html import escape
from urllib.parse import quote

from hookgate.channels import card_text
from hookgate.channels.base import ApprovalCard, CardOutcome
from hookgate.channels.masking import ArgsLimits, render_args
from hookgate.channels.signed_links import LinkClaims

ARGS_LIMITS = ArgsLimits(value_chars=500, budget=6000)
TEXT_CHARS = 1000


def link(callback_url: str, token: str) -> str:
    return f"{callback_url}?t={quote(token)}"


def approval_subject(card: ApprovalCard) -> str:
    return card_text.clip(card_text.title(card), 200)


def approval_body(card: ApprovalCard, *, now: datetime, patterns: Iterable[str],
                  approve_url: str, reject_url: str) -> str:
    lines = [card_text.title(card), "", f"Agent: {card_text.agent_label(card)}"]
    if card.requester:
        lines.append(f"Requested by: {card.requester}")
    lines.append(f"Time left: {card_text.time_left(card.expires_at, now)}")
    lines += card_text.context_lines(card, message_chars=TEXT_CHARS, text_chars=TEXT_CHARS)
    lines += ["", "Arguments (exactly what will run; secrets masked):",
              render_args(card.args, patterns=patterns, limits=ARGS_LIMITS,
                          inbox_url=card.inbox_url), "",
              "Each link opens a page where you confirm; opening it decides nothing.",
              f"Approve: {approve_url}", f"Reject:  {reject_url}"]
    if card.inbox_url:
        lines.append(f"{card_text.inbox_link(card)}: {card.inbox_url}")
    return "\n".join(lines) + "\n"


def decided_subject(outcome: CardOutcome, tool_name: str | None) -> str:
    status = card_text.STATUS_TITLES[outcome.status]
    return f"{status}: {tool_name}" if tool_name else status


def decided_body(outcome: CardOutcome) -> str:
    lines = [card_text.outcome_line(outcome)]
    if outcome.reason:
        lines.append(f"Reason: {outcome.reason}")
    lines += card_text.decision_lines(outcome, text_chars=TEXT_CHARS)
    lines.append(f"request {outcome.request_id}")
    return "\n".join(lines) + "\n"


def _page(title: str, body: str) -> bytes:
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{escape(title)}"
            f"</title><meta name=\"robots\" content=\"noindex\"></head><body>{body}"
            "</body></html>").encode()


def confirmation_page(claims: LinkClaims, token: str) -> bytes:
    """The page a link opens: one button that POSTs the token back."""
    verb = "Approve" if claims.decision == "approve" else "Reject"
    return _page(f"{verb} request {claims.request_id}", (
        f"<h1>{verb} request {escape(claims.request_id)}?</h1>"
        f"<p>As {escape(claims.recipient)}. The mail shows what will run.</p>"
        "<form method=\"post\">"
        f"<input type=\"hidden\" name=\"t\" value=\"{escape(token)}\">"
        f"<button type=\"submit\">{verb}</button></form>"))


def result_page(message: str) -> bytes:
    return _page(message, f"<h1>{escape(message)}</h1>")
