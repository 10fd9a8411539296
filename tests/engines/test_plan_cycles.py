"""Cycles in a DAG plan or a workflow are found by graphlib before anything runs, and the
error names the cycle along "depends on"; a long plan is checked without recursion."""

from __future__ import annotations

import itertools

import pytest

from hookgate import DAGEngine, ScriptedLLM
from hookgate.engines.graph import GraphError, check_graph
from tests.engines.test_dag_engine import plan, step
from tests.engines.world import Bank, make_agent


async def test_a_three_step_cycle_in_a_plan_is_named_and_nothing_runs() -> None:
    bank = Bank()
    bad = plan(step("quote", "oa__quote", {"vendor": "x"}),
               step("a", "oa__purchase_pay", {"amount": 1, "vendor": "x"}, depends_on=["c"]),
               step("b", "oa__quote", {"vendor": "x"}, depends_on=["a", "quote"]),
               step("c", "oa__quote", {"vendor": "x"}, depends_on=["b"]))
    result = await DAGEngine(ScriptedLLM([bad])).run(make_agent(bank), "go")

    assert result.status == "failed" and result.error is not None
    assert "the steps form a cycle: a → c → b → a" in result.error
    assert bank.payments == [] and bank.quotes == 0


def test_a_cycle_at_the_end_of_a_five_thousand_step_chain_is_named() -> None:
    order = [f"s{i}" for i in range(5000)]
    deps = {f"s{i}": [f"s{i - 1}"] for i in range(1, 5000)}
    check_graph(order, deps, "step")  # a long chain is fine
    deps["s0"] = ["s4999"]
    with pytest.raises(GraphError) as caught:
        check_graph(order, deps, "step")
    named = str(caught.value).removeprefix("the steps form a cycle: ").split(" → ")
    assert len(named) == 5001 and named[0] == named[-1]
    assert all(f"s{int(b[1:]) + 1}" == a or (a, b) == ("s0", "s4999")
               for a, b in itertools.pairwise(named))
