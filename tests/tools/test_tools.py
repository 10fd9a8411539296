"""Turning functions into tools (SPEC §2): the schema the model is shown, and the flags the
hooks read (connector, writes, requires_confirmation)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from hookgate import HookRegistry, Tool, tool
from hookgate.tools import CallIdentity, ToolCall, ToolDefinitionError, execute_tool_call
from hookgate.tools.guarded_call import new_call


async def call(t: Tool, args: dict[str, Any]) -> str:
    """Run ``t`` the only way anything runs a tool: through the guarded path, no hooks."""
    outcome = await execute_tool_call(
        new_call(CallIdentity(agent_id="a", user_id="u", org_id="o", run_id="r1"),
                 ToolCall("c1", t.name, args), {t.name: t}),
        registry=HookRegistry(),
    )
    assert outcome.status == "ok", outcome.observation
    return outcome.observation


def test_bare_decorator_names_the_tool_after_the_function() -> None:
    @tool
    async def crm__find_customer(email: str) -> str:
        """Find a customer by e-mail."""
        return email

    assert isinstance(crm__find_customer, Tool)
    assert crm__find_customer.name == "crm__find_customer"
    assert crm__find_customer.description == "Find a customer by e-mail."
    assert crm__find_customer.requires_confirmation is False
    assert crm__find_customer.writes is False


def test_decorator_options_set_name_description_and_flags() -> None:
    @tool(name="oa__purchase_pay", description="Pay a purchase order.", writes=True,
          requires_confirmation=True, connector="erp")
    async def pay(amount: int) -> str:
        """Docstring the explicit description replaces."""
        return "paid"

    assert pay.name == "oa__purchase_pay"
    assert pay.description == "Pay a purchase order."
    assert pay.writes is True
    assert pay.needs_confirmation({"amount": 1}) is True
    assert pay.connector == "erp"


def test_the_schema_comes_from_type_hints_and_only_parameters_without_default_are_required(
) -> None:
    @tool
    async def oa__purchase_pay(amount: int, vendor: str, note: str = "",
                               urgent: bool = False, tags: list[str] | None = None) -> str:
        """Pay a vendor.

        Used for purchase orders only.
        """
        return "paid"

    params = oa__purchase_pay.parameters
    assert params["type"] == "object"
    assert params["required"] == ["amount", "vendor"]
    assert params["properties"]["amount"] == {"type": "integer"}
    assert params["properties"]["vendor"] == {"type": "string"}
    assert params["properties"]["note"] == {"type": "string", "default": ""}
    assert params["properties"]["urgent"] == {"type": "boolean", "default": False}
    assert set(params["properties"]) == {"amount", "vendor", "note", "urgent", "tags"}
    assert params["additionalProperties"] is False
    assert oa__purchase_pay.description == "Pay a vendor.\n\nUsed for purchase orders only."
    assert oa__purchase_pay.schema() == {"type": "function", "function": {
        "name": "oa__purchase_pay", "description": oa__purchase_pay.description,
        "parameters": params}}


async def test_sync_and_async_functions_both_run_with_their_arguments() -> None:
    @tool
    def add(a: int, b: int = 2) -> int:
        return a + b

    @tool
    async def shout(text: str) -> str:
        await asyncio.sleep(0)
        return text.upper()

    assert await call(add, {"a": 40}) == "42"
    assert await call(shout, {"text": "hi"}) == "HI"


async def test_parameters_may_be_named_like_pydantic_internals() -> None:
    @tool
    def store(json: str, schema: str, model_config: str, _draft: bool = False) -> str:
        return f"{json}|{schema}|{model_config}|{_draft}"

    assert set(store.parameters["properties"]) == {"json", "schema", "model_config", "_draft"}
    observed = await call(store, {"json": "j", "schema": "s", "model_config": "m",
                                  "_draft": True})
    assert observed == "j|s|m|True"


def test_connector_defaults_to_the_part_before_the_double_underscore() -> None:
    @tool
    async def oa__purchase_pay(amount: int) -> str:
        return "paid"

    @tool
    async def search(query: str) -> str:
        return query

    assert oa__purchase_pay.connector == "oa"
    assert search.connector is None


def test_an_explicit_connector_wins_over_the_name() -> None:
    @tool(connector="bank")
    async def oa__transfer(amount: int) -> str:
        return "sent"

    assert oa__transfer.connector == "bank"


def test_writes_flag_defaults_to_false_and_can_be_set() -> None:
    @tool
    async def read(key: str) -> str:
        return key

    @tool(writes=True)
    async def write(key: str) -> str:
        return key

    assert (read.writes, write.writes) == (False, True)


def test_requires_confirmation_as_a_flag() -> None:
    @tool(requires_confirmation=True)
    async def delete(id: str) -> str:
        return id

    @tool
    async def view(id: str) -> str:
        return id

    assert delete.needs_confirmation({"id": "x"}) is True
    assert view.needs_confirmation({"id": "x"}) is False


def test_requires_confirmation_as_a_predicate_over_the_arguments() -> None:
    @tool(requires_confirmation=lambda a: a["amount"] > 50_000)
    async def oa__purchase_pay(amount: int, vendor: str) -> str:
        return "paid"

    assert oa__purchase_pay.needs_confirmation({"amount": 60_000, "vendor": "ACME"}) is True
    assert oa__purchase_pay.needs_confirmation({"amount": 50_000, "vendor": "ACME"}) is False
    assert oa__purchase_pay.needs_confirmation({"amount": 12, "vendor": "ACME"}) is False


def test_a_predicate_that_raises_counts_as_needing_confirmation() -> None:
    def over_limit(args: Mapping[str, Any]) -> bool:
        return bool(args["amount"] > args["limit"])  # no "limit": KeyError

    @tool(requires_confirmation=over_limit)
    async def pay(amount: int) -> str:
        return "paid"

    assert pay.needs_confirmation({"amount": 1}) is True


def test_a_parameter_without_a_type_hint_is_refused() -> None:
    def pay(amount, vendor: str) -> str:  # type: ignore[no-untyped-def]
        return "paid"

    with pytest.raises(ToolDefinitionError, match="'amount' needs a type hint"):
        tool(pay)


def test_star_args_cannot_be_described_to_a_model() -> None:
    def pay(*amounts: int) -> str:
        return "paid"

    with pytest.raises(ToolDefinitionError, match="'amounts'"):
        tool(pay)


class Handle:
    """A type with no JSON form: a model could never pass one."""


def test_a_parameter_type_that_cannot_be_described_is_refused_at_definition() -> None:
    def use(handle: Handle) -> str:
        return "used"

    with pytest.raises(ToolDefinitionError, match="tool 'use': cannot describe its parameters"):
        tool(use)
