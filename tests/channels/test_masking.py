"""What an approval card may show of a tool call's arguments."""

from __future__ import annotations

import json
from typing import Any

from hookgate.channels.masking import (
    MASK,
    ArgsLimits,
    mask_secrets,
    render_args,
    secret_patterns,
)


def test_secret_looking_keys_are_masked_at_any_depth_and_in_any_case() -> None:
    args: dict[str, Any] = {
        "url": "https://api.example/pay",
        "headers": {"Authorization": "Bearer abc", "X-Api-Key": "k1", "Accept": "json"},
        "accounts": [{"name": "ops", "PASSWORD": "hunter2"}, {"name": "db", "db_secret": "s"}],
        "session_cookie": "c=1",
        "refresh_token": {"value": "r1", "scope": "all"},
    }
    masked = mask_secrets(args)
    assert masked == {
        "url": "https://api.example/pay",
        "headers": {"Authorization": MASK, "X-Api-Key": MASK, "Accept": "json"},
        "accounts": [{"name": "ops", "PASSWORD": MASK}, {"name": "db", "db_secret": MASK}],
        "session_cookie": MASK,
        "refresh_token": MASK,  # the whole value under a secret key, even an object
    }
    assert args["headers"]["Authorization"] == "Bearer abc"  # the real args stay intact


def test_no_secret_reaches_the_rendered_text() -> None:
    text = render_args({"db": {"password": "hunter2"}, "apiKey": "sk-live-9"})
    assert "hunter2" not in text and "sk-live-9" not in text
    assert text.count(MASK) == 2


def test_extra_patterns_add_to_the_defaults_and_never_replace_them() -> None:
    patterns = secret_patterns(["IBAN"])
    masked = mask_secrets({"iban": "DE89...", "password": "p", "amount": 5}, patterns)
    assert masked == {"iban": MASK, "password": MASK, "amount": 5}


def test_a_long_value_is_cut_with_a_marker_saying_how_long_it_was_and_where_to_read_it() -> None:
    body = "x" * 1234
    text = render_args(
        {"body": body, "to": "ops"},
        limits=ArgsLimits(value_chars=100, budget=10_000),
        inbox_url="https://gate.example/inbox/r1",
    )
    shown = json.loads(text)
    assert shown["to"] == "ops"
    assert shown["body"].startswith("x" * 100)
    assert shown["body"].endswith(
        "… [cut, 1234 chars in all — see the inbox: https://gate.example/inbox/r1]"
    )
    assert "x" * 101 not in text


def test_without_an_inbox_link_the_marker_still_says_something_was_cut() -> None:
    text = render_args({"body": "y" * 500}, limits=ArgsLimits(value_chars=10, budget=10_000))
    assert "… [cut, 500 chars in all — see the inbox]" in text


def test_many_values_stay_within_the_cards_budget() -> None:
    args = {f"line_{i}": "z" * 50 for i in range(200)}
    limits = ArgsLimits(value_chars=300, budget=800)
    text = render_args(args, limits=limits)
    full = json.dumps(args, indent=2, ensure_ascii=False)
    head, marker = text.rsplit("\n", 1)
    assert len(head) == 800
    assert marker == f"… [cut, {len(full)} chars in all — see the inbox]"


def test_short_arguments_are_shown_whole_as_json() -> None:
    args = {"to": "ACME", "amount": 12.5, "tags": ["a", "b"], "note": None}
    assert json.loads(render_args(args)) == args
