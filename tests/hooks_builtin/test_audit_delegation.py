"""A delegate's calls on the built-in engines: their audit rows record the run that delegated
and the depth (hashed with the row, version 4), the caller's own rows record neither, and the
chain verifies."""

from __future__ import annotations

import pytest

from hookgate import Agent, ScriptedLLM
from hookgate.cli.audit_cmd import delegation_text
from hookgate.engines import DelegatingReActEngine, Delegation
from hookgate.hooks.services import HookServices
from hookgate.storage.audit import verify
from hookgate.storage.database import Database
from tests.hooks_builtin.world import OA, agent, call, log_rows

pytestmark = pytest.mark.both_databases


async def test_a_delegates_rows_name_the_run_that_delegated_and_the_depth(
        db: Database) -> None:
    oa = OA()
    clerk = agent(oa, "audit_log", agent_id="clerk")
    boss = Agent(id="boss", name="boss", instructions="", tools=[], org_id="acme",
                 model_config_json={"delegates": ["clerk"],
                                    "hooks": {"class_hooks": ["audit_log"]}})
    models = {"boss": [call("call_agent", agent_id="clerk", message="pay acme"),
                       {"answer": "done"}],
              "clerk": [call("oa__purchase_pay", amount=10, vendor="acme"),
                        {"answer": "paid"}]}
    services = HookServices(database=db)
    engine = DelegatingReActEngine(
        ScriptedLLM(models["boss"]), services=services,
        delegation=Delegation({"boss": boss, "clerk": clerk},
                              lambda a: ScriptedLLM(models[a])))
    result = await engine.run(boss, "get it paid", user_id="alice", org_id="acme")
    assert result.status == "completed" and oa.payments == [{"amount": 10, "vendor": "acme"}]
    rows = {r["tool_name"]: r for r in await log_rows(db)}
    paid, asked = rows["oa__purchase_pay"], rows["call_agent"]
    assert (paid["agent_id"], paid["execution_path"], paid["parent_session"], paid["depth"],
            paid["hash_v"]) == ("clerk", "delegate", result.run_id, 1, 4)
    assert paid["run_id"] != result.run_id
    assert delegation_text(paid) == f"depth 1 from {result.run_id}"  # `hookgate audit list`
    assert delegation_text(asked) == "-"
    assert (asked["parent_session"], asked["depth"], asked["hash_v"]) == (None, None, 2)
    report = await verify(db)
    assert report.ok and report.rows == 2, report.problems
