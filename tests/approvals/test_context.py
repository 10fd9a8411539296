"""Numbers written for people beside the exact arguments: grouped, never rounded, at any
depth; booleans, NaN and small numbers left alone."""

from __future__ import annotations

from hookgate.approvals.context import group, readable_numbers


def test_numbers_are_grouped_without_changing_their_digits() -> None:
    assert group(60000) == "60,000"
    assert group(60000.0) == "60,000"
    assert group(1234.5) == "1,234.5"
    assert group(-1234567.25) == "-1,234,567.25"
    assert group(1e300) == "1e+300"


def test_every_large_number_at_any_depth_is_listed_with_its_path() -> None:
    args = {"amount": 60000, "small": 999, "flag": True, "nan": float("nan"),
            "inf": float("inf"), "lines": [{"price": 12500.5}, {"price": 3}],
            "nested": {"total": 1_000_000}, "text": "60000"}
    assert readable_numbers(args) == [
        {"path": "amount", "text": "60,000"},
        {"path": "lines[0].price", "text": "12,500.5"},
        {"path": "nested.total", "text": "1,000,000"},
    ]
