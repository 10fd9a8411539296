"""An approver's edit is validated and converted by the tool's declared parameter types, over
a real database: a word for a number is refused with the reason (HTTP 422 on the API) and
nothing changes; a number written as text converts as the engines convert a model's own
arguments, and exactly the converted call runs. A tool known only by a JSON schema that its
validation does not convert by never takes a value of another type."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import pytest

from hookgate import Tool
from hookgate.approvals.edits import agent_tool, checked_edit
from hookgate.approvals.errors import InvalidEdit
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.storage.database import Database
from tests.approvals.test_edit_binding import _waiting
from tests.approvals.test_persistent_gate import ALICE, Bank, make_agent

pytestmark = pytest.mark.both_databases


@pytest.mark.parametrize("amount", ["lots", None, [1], {"n": 1}, "1e999", "NaN"])
async def test_an_edit_of_the_wrong_type_is_refused_and_the_request_still_waits(
        db: Database, approvals: PersistentApprovals, amount: Any) -> None:
    bank = Bank()
    agent = make_agent(bank)
    approvals.tool_of = partial(agent_tool, {agent.id: agent})
    task, rid = await _waiting(db, approvals, agent)
    with pytest.raises(InvalidEdit, match="amount"):
        await approvals.decide(rid, "approve", ALICE,
                               arguments={"amount": amount, "vendor": "ACME"})
    request = await approvals.store.get(rid)
    assert request is not None and request.pending and request.edited_args is None
    await approvals.decide(rid, "reject", ALICE)
    await asyncio.wait_for(task, 10)
    assert bank.payments == []


async def test_a_number_written_as_text_converts_as_the_engines_convert_and_runs_so(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    agent = make_agent(bank)
    approvals.tool_of = partial(agent_tool, {agent.id: agent})
    task, rid = await _waiting(db, approvals, agent)
    decided = await approvals.decide(rid, "approve", ALICE,
                                     arguments={"amount": "40000", "vendor": "ACME"})
    assert decided.edited_args == {"amount": 40000.0, "vendor": "ACME"}
    await asyncio.wait_for(task, 10)
    assert bank.payments == [{"amount": 40000.0, "vendor": "ACME"}]
    assert isinstance(bank.payments[0]["amount"], float)


def _schema_tool() -> Tool:
    async def never(**_kw: Any) -> None:
        raise AssertionError("an approval test never runs the tool")

    return Tool(name="transfer", description="", _fn=never, parameters={
        "type": "object", "properties": {"amount": {"type": "number"},
                                         "to": {"type": "string"},
                                         "urgent": {"type": ["boolean", "null"]}},
        "required": ["amount", "to"]})


@pytest.mark.parametrize("edit", [{"amount": "lots", "to": "bob"},
                                  {"amount": True, "to": "bob"},
                                  {"amount": 5, "to": 7},
                                  {"amount": 5, "to": "bob", "urgent": "yes"}])
def test_a_schema_tools_edit_of_another_type_is_refused(edit: dict[str, Any]) -> None:
    with pytest.raises(InvalidEdit, match="refused"):
        checked_edit(_schema_tool(), "transfer", {"amount": 5, "to": "bob"}, edit)


def test_a_schema_tools_edit_of_the_declared_types_is_taken() -> None:
    edited = checked_edit(_schema_tool(), "transfer", {"amount": 5, "to": "bob"},
                          {"amount": 4.5, "to": "bob", "urgent": None})
    assert edited is not None and edited[0] == {"amount": 4.5, "to": "bob", "urgent": None}


def test_a_request_of_an_agent_now_in_another_org_finds_no_tool_to_edit() -> None:
    agent = make_agent(Bank())

    class Request:
        agent_id = agent.id
        tool_name = "oa__purchase_pay"
        org_id = "globex"

    assert agent_tool({agent.id: agent}, Request()) is None  # type: ignore[arg-type]
    Request.org_id = "acme"
    assert agent_tool({agent.id: agent}, Request()) is not None  # type: ignore[arg-type]
