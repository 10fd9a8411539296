"""The OpenAI-compatible model against a real chat-completions endpoint on loopback."""

from __future__ import annotations

import pytest

from hookgate import Agent, ReActEngine, tool
from hookgate.llm import ModelError, OpenAICompatibleModel
from tests.fakes.chat_completions import (
    FakeChatCompletions,
    RawReply,
    closed_port_url,
    tool_call,
    tool_then_answer,
)

KEY = "sk-test-key"
MODEL = "gpt-fake"

prices_asked: list[str] = []


@tool
async def price_of(item: str) -> str:
    """Look up an item's list price."""
    prices_asked.append(item)
    return f"{item} costs 120.00"


def shop_agent() -> Agent:
    return Agent(id="shop", name="Shop", instructions="Answer price questions.",
                 tools=[price_of])


@pytest.fixture(autouse=True)
def _fresh_price_log() -> None:
    prices_asked.clear()


async def test_a_react_run_calls_the_tool_the_endpoint_picked_and_answers_with_its_result():
    with FakeChatCompletions(KEY, MODEL, tool_then_answer("price_of", {"item": "stapler"})) as fake:
        engine = ReActEngine(llm=OpenAICompatibleModel(fake.base_url, KEY, MODEL))
        result = await engine.run(shop_agent(), "How much is a stapler?", user_id="alice")

    assert result.status == "completed"
    assert result.answer == "Done: stapler costs 120.00"
    assert prices_asked == ["stapler"]
    first, second = fake.requests
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert first.body["model"] == MODEL
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert first.body["tools"][0]["function"]["name"] == "price_of"
    assert first.body["tools"][0]["function"]["parameters"]["required"] == ["item"]
    assert second.tool_messages() == [
        {"role": "tool", "tool_call_id": "call_1", "content": "stapler costs 120.00"}
    ]
    assistant = second.messages[-2]
    assert assistant["tool_calls"][0]["function"]["name"] == "price_of"
    assert fake.rejected == []


async def test_extra_headers_reach_the_endpoint_with_every_request():
    with FakeChatCompletions(KEY, MODEL, lambda body: {"content": "hi"}) as fake:
        model = OpenAICompatibleModel(fake.base_url, KEY, MODEL,
                                      extra_headers={"X-Tenant": "acme"})
        turn = await model.complete([{"role": "user", "content": "hello"}], [])

    assert turn.answer == "hi"
    assert fake.requests[0].headers["x-tenant"] == "acme"
    assert "tools" not in fake.requests[0].body


async def test_an_endpoint_that_is_down_fails_the_run_with_an_error_naming_it():
    url = closed_port_url()
    engine = ReActEngine(llm=OpenAICompatibleModel(url, KEY, MODEL, max_retries=0))

    result = await engine.run(shop_agent(), "How much is a stapler?")

    assert result.status == "failed"
    assert result.error is not None
    assert url in result.error
    assert "cannot connect" in result.error
    assert prices_asked == []


async def test_a_wrong_key_is_reported_with_the_endpoints_status_and_message():
    with FakeChatCompletions(KEY, MODEL, lambda body: {"content": "hi"}) as fake:
        model = OpenAICompatibleModel(fake.base_url, "sk-wrong", MODEL, max_retries=0)
        with pytest.raises(ModelError) as info:
            await model.complete([{"role": "user", "content": "hello"}], [])

    message = str(info.value)
    assert fake.base_url in message
    assert "HTTP 401" in message
    assert "Incorrect API key" in message


async def test_a_reply_without_choices_is_a_model_error_not_an_empty_answer():
    reply = RawReply(200, {"id": "x", "object": "chat.completion", "choices": []})
    with FakeChatCompletions(KEY, MODEL, lambda body: reply) as fake:
        model = OpenAICompatibleModel(fake.base_url, KEY, MODEL)
        with pytest.raises(ModelError, match="malformed reply: the reply has no choices"):
            await model.complete([{"role": "user", "content": "hello"}], [])


async def test_arguments_that_are_not_json_never_run_the_tool_and_the_model_is_told_why():
    def respond(body: dict) -> dict:
        tool_msgs = [m for m in body["messages"] if m["role"] == "tool"]
        if tool_msgs:
            return {"content": "sorry: " + tool_msgs[0]["content"]}
        return tool_call("price_of", '{"item": "stapler"')

    with FakeChatCompletions(KEY, MODEL, respond) as fake:
        engine = ReActEngine(llm=OpenAICompatibleModel(fake.base_url, KEY, MODEL))
        result = await engine.run(shop_agent(), "How much is a stapler?")

    assert result.status == "completed"
    assert prices_asked == []
    observation = fake.requests[1].tool_messages()[0]["content"]
    assert "not valid JSON" in observation
    assert result.tool_events()[0]["status"] == "invalid"


def test_settings_not_passed_come_from_the_environment():
    env = {"HOOKGATE_LLM_BASE_URL": "http://127.0.0.1:9/v1", "HOOKGATE_LLM_API_KEY": "k",
           "HOOKGATE_LLM_MODEL": "local-model"}

    model = OpenAICompatibleModel(env=env)

    assert model.base_url == "http://127.0.0.1:9/v1"
    assert model.model == "local-model"


def test_a_missing_setting_names_the_environment_variable_to_set():
    with pytest.raises(ModelError, match="HOOKGATE_LLM_API_KEY"):
        OpenAICompatibleModel("http://127.0.0.1:9/v1", None, "m", env={})
