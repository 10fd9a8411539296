"""The arguments boundary (hookgate.tools.arguments) and tool validation on their own:
strict parsing, the admitted call, and pydantic's coercions that must not let NaN in."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

from hookgate import tool
from hookgate.tools.arguments import (
    MAX_DEPTH,
    ArgumentsRefused,
    admit_call,
    check_arguments,
    parse_arguments,
    refusal_of,
    storable_text,
)
from hookgate.tools.calls import ToolCall
from hookgate.tools.errors import ToolArgumentsError


class Inner(BaseModel):
    x: float


@tool
def pay(amount: float, vendor: str, fee: Decimal = Decimal(0),
        inner: Inner | None = None) -> str:
    """Pay."""
    return "paid"


@pytest.mark.parametrize("text, why", [
    ('{"a": NaN}', "NaN"), ('{"a": Infinity}', "Infinity"), ('{"a": -Infinity}', "Infinity"),
    ('{"a": 1e400}', "1e400"), ('{"a": "\\ud83d"}', "lone surrogate"),
    ('{"a": "\\udc00x"}', "lone surrogate"), ('{"a": "\\u0000"}', "NUL"),
    ('{"a": 9007199254740993}', "outside"), ('{"a": ' * 40 + "1" + "}" * 40, "deeper"),
    ("[" * 200_000, "deeper"), ('{"a": 1', "not valid JSON"),
    ('"' + "x" * 300_000 + '"', "characters"),
])
def test_strict_parsing_refuses(text: str, why: str) -> None:
    with pytest.raises(ArgumentsRefused, match=why):
        parse_arguments(text)


def test_strict_parsing_keeps_ordinary_json() -> None:
    value = parse_arguments('{"a": 1.5, "b": [1, -2, {"c": "\\ud83d\\ude00 ok"}], '
                            '"d": 9007199254740991, "e": null, "f": true}')
    assert value == {"a": 1.5, "b": [1, -2, {"c": "😀 ok"}], "d": 2**53 - 1, "e": None,
                     "f": True}
    check_arguments({"nested": [[[{"k": "v"}]]]})
    check_arguments(_deep(MAX_DEPTH - 1))  # 31 objects and the value in the last: 32 levels


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"d": value}
    return value


def test_check_refuses_what_no_store_holds() -> None:
    for bad in ({"a": float("nan")}, {"a": [float("-inf")]}, {"\ud83d": 1}, {("t",): "x"},
                {"a": object()}, _deep(MAX_DEPTH + 1)):
        with pytest.raises(ArgumentsRefused):
            check_arguments(bad)


def test_the_admitted_call_is_storable_deterministic_and_idempotent() -> None:
    call = ToolCall("c" * 300, "pay\ud83d" + "x" * 400, {"amount": float("nan")})
    admitted = admit_call(call)
    assert admitted.id.startswith("call_") and len(admitted.id) <= 64
    assert admitted.id == admit_call(call).id and admit_call(admitted).id == admitted.id
    assert len(admitted.name) <= 256 and storable_text(admitted.name) == admitted.name
    assert "finite" in (refusal_of(admitted.args) or "")
    assert admit_call(admitted).args == admitted.args
    ok = ToolCall("call_1", "pay", {"amount": 1, "vendor": "v"})
    assert admit_call(ok) == ok
    # Ids the engines build (step_<128 chars>) are kept up to the column's width.
    assert admit_call(ToolCall("s" * 100, "pay", {}), max_id=128).id == "s" * 100


@pytest.mark.parametrize("args", [
    {"amount": "NaN", "vendor": "v"}, {"amount": "Infinity", "vendor": "v"},
    {"amount": "-inf", "vendor": "v"}, {"amount": "1e400", "vendor": "v"},
    {"amount": float("nan"), "vendor": "v"}, {"amount": 1, "vendor": "v", "fee": "NaN"},
    {"amount": 1, "vendor": "v", "inner": {"x": "NaN"}},
    {"amount": 1, "vendor": "v\ud83d"}, {"amount": 1, "vendor": "v", "inner": {"x": 1e309}},
])
def test_tool_validation_refuses_non_finite_numbers_also_after_coercion(
        args: dict[str, Any]) -> None:
    with pytest.raises(ToolArgumentsError):
        pay.validate(args)


def test_tool_validation_refuses_the_boundary_stand_in_with_its_reason() -> None:
    admitted = admit_call(ToolCall("c", "pay", {"amount": float("inf"), "vendor": "v"}))
    with pytest.raises(ToolArgumentsError, match=r"refused: .*inf is not a finite number"):
        pay.validate(admitted.args)
    assert pay.validate({"amount": 5, "vendor": "v"})["amount"] == 5.0


def test_storable_text_escapes_what_no_store_holds() -> None:
    assert storable_text("ok é") == "ok é"
    assert storable_text("a\ud83db\x00") == "a\\ud83db\\x00"
