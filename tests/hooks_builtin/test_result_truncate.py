"""result_truncate: a huge tool output reaches the model cut to size, with its real size stated."""

from __future__ import annotations

from typing import Any

import pytest

from hookgate import Agent, HookBuildError, HookContext, HookPoint, ReActEngine, ScriptedLLM, tool
from hookgate.catalog.builtin.result_truncate import ResultTruncate, truncate


async def truncated(result: Any, **params: Any) -> Any:
    hook = ResultTruncate.from_declaration(params, None)
    ctx = HookContext(hook_point=HookPoint.POST_TOOL_USE, tool_name="t", tool_result=result)
    return (await hook.execute(ctx)).modified_result


async def test_a_long_output_is_cut_with_a_marker_stating_its_size():
    out = await truncated("x" * 123_456)

    assert len(out) <= 8000
    assert out.startswith("x" * 7000)
    head = len(out) - len(out.lstrip("x"))
    assert out.endswith(f"\n… [truncated: 123,456 characters in all; showing the first "
                        f"{head:,}]")


async def test_max_chars_includes_the_marker_so_the_limit_holds_exactly():
    for size in (1001, 5000, 10**6):
        out = await truncated("y" * size, max_chars=1000)
        assert 900 < len(out) <= 1000


async def test_an_output_within_the_limit_is_untouched():
    assert await truncated("z" * 8000) is None
    assert await truncated({"rows": [1, 2, 3]}) is None


@pytest.mark.parametrize(("unit", "what"), [
    ("👍", "an astral character"),
    ("\ud83d\ude00", "a surrogate pair left in a str"),
    ("👨\u200d👩\u200d👧\u200d👦", "emoji joined by zero-width joiners"),
    ("👍🏽", "an emoji with a skin tone"),
    ("❤\ufe0f", "a variation selector"),
    ("🇨🇳", "a flag (two regional indicators)"),
    ("e\u0301\u0323", "a letter with combining accents"),
    ("\r\n", "CR LF"),
])
@pytest.mark.parametrize("keep_tail", [0, 100])
async def test_a_cut_never_splits_a_character(unit, what, keep_tail):
    text = unit * (5000 // len(unit)) + "."  # the odd end moves the tail's cut point too
    for limit in range(1000, 1008):  # every cut position within a unit
        out = await truncated(text, max_chars=limit, keep_tail=keep_tail)

        assert len(out) <= limit
        head, _, rest = out.partition("\n… [truncated:")
        assert head and head == unit * (len(head) // len(unit)), what
        if keep_tail:
            tail = rest.partition("] …\n")[2][:-1]
            assert tail and tail == unit * (len(tail) // len(unit)), what


async def test_a_non_string_result_is_serialised_as_json_before_the_cut():
    rows = [{"id": i, "name": f"客户 {i}"} for i in range(2000)]
    out = await truncated(rows, max_chars=500)

    assert out.startswith('[{"id": 0, "name": "客户 0"}, {"id": 1')
    assert "characters in all" in out and len(out) <= 500


async def test_keep_tail_keeps_the_end_of_the_output_too():
    text = "".join(f"line {i}\n" for i in range(10_000))
    out = await truncated(text, max_chars=2000, keep_tail=300)

    assert len(out) <= 2000
    assert out.startswith("line 0\nline 1\n")
    assert out.endswith("line 9999\n")
    assert "characters in all; showing the first " in out
    assert "and the last 300] …\n" in out
    assert out.count("line 9999") == 1


@pytest.mark.parametrize(("params", "message"), [
    ({"max_chars": "8000"}, "max_chars must be a whole number, got '8000'"),
    ({"max_chars": True}, "max_chars must be a whole number"),
    ({"max_chars": 0}, "max_chars must not be below 200, got 0"),
    ({"max_chars": -5}, "max_chars must not be below 200"),
    ({"keep_tail": -1}, "keep_tail must not be negative"),
    ({"max_chars": 1000, "keep_tail": 600}, "keep_tail (600) may be at most half of max_chars"),
    ({"max_char": 100}, "unknown params 'max_char'"),
])
def test_bad_params_are_refused_with_a_clear_error(params, message):
    with pytest.raises(HookBuildError) as caught:
        ResultTruncate.from_declaration(params, None)
    assert message in str(caught.value)


def test_truncate_leaves_text_that_fits_alone():
    assert truncate("short", 200) is None


def customers_csv() -> str:
    return "id,name\n" + "".join(f"{i},customer {i}\n" for i in range(50_000))


async def test_the_model_sees_the_truncated_observation_in_a_full_run():
    @tool
    def db__export(table: str) -> str:
        """Export a table as CSV."""
        return customers_csv()

    full_size = len(customers_csv())
    agent = Agent(
        id="analyst", name="Analyst", instructions="Answer from the data.", tools=[db__export],
        model_config_json={"hooks": {"class_hooks": [
            {"name": "result_truncate", "params": {"max_chars": 3000, "keep_tail": 200}},
        ]}},
    )
    shown: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        shown.append(messages)
        if len(shown) == 1:
            return {"tool_calls": [{"id": "c1", "name": "db__export",
                                    "args": {"table": "customers"}}]}
        return {"answer": "done"}

    result = await ReActEngine(ScriptedLLM(model)).run(agent, "export customers")

    assert result.status == "completed"
    [observation] = [m["content"] for m in shown[1] if m["role"] == "tool"]
    assert len(observation) <= 3000
    assert observation.startswith("id,name\n0,customer 0\n")
    assert f"[truncated: {full_size:,} characters in all; showing the first " in observation
    assert observation.endswith("49999,customer 49999\n")
    [event] = result.tool_events()
    assert event["side_effects"] == [
        f"result_truncate: observation cut from {full_size:,} to {len(observation):,} characters"
    ]
