"""Evals bypass hooks on purpose; nothing else can. A request body, a configuration file or
an agent declaration that tries to switch the bypass on is refused, and a run started over
HTTP always passes the hooks."""

from __future__ import annotations

import httpx
import pytest

from hookgate import ReActEngine, ScriptedLLM
from hookgate.config import ConfigError, parse_config
from hookgate.evals import EvalEngine
from hookgate.workflows import parse_workflow
from tests.adversarial.conftest import Tally
from tests.engines.world import GATED, Bank, events, make_agent
from tests.live_server import live_server
from tests.server.demo_world import auth, world
from tests.server.test_api import wait_run


def test_a_request_body_cannot_switch_the_bypass_on(database_url: str,
                                                    attempt: Tally) -> None:
    deployment, bank = world(database_url)
    deployment.workflows = {"w": parse_workflow({"id": "w", "as_agent": "buyer", "nodes": [
        {"id": "p", "type": "tool", "tool": "oa__purchase_pay",
         "args": {"amount": GATED, "vendor": "ACME"}}]})}
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        for body in ({"agent_id": "buyer", "message": "pay", "hooks_bypassed": True},
                     {"agent_id": "buyer", "message": "pay", "engine": "eval"}):
            r = c.post("/api/runs", json=body, headers=auth("alice"))
            assert r.status_code == 422, r.text
        r = c.post("/api/workflows/w/runs", json={"hooks_bypassed": True},
                   headers=auth("alice"))
        assert r.status_code == 422
        # A normal run of the same payment is gated: it waits, and nothing is paid.
        run_id = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
                        headers=auth("alice")).json()["run_id"]
        with pytest.raises(AssertionError, match="did not finish"):
            wait_run(c, run_id, timeout=1)
    attempt.record("hooks_bypassed in a request body", bool(bank.payments))
    assert bank.payments == []


def test_the_configuration_cannot_switch_the_bypass_on(attempt: Tally) -> None:
    base = {"models": {"s": {"type": "scripted", "turns": [{"answer": "x"}]}}}
    with pytest.raises(ConfigError, match="unknown key 'hooks_bypassed'"):
        parse_config({**base, "hooks_bypassed": True})
    with pytest.raises(ConfigError, match="unknown key 'hooks_bypassed'"):
        parse_config({**base, "agents": [{"id": "a", "model": "s", "hooks_bypassed": True}]})
    attempt.record("hooks_bypassed in the configuration", False)


async def test_an_agent_declaration_cannot_switch_the_bypass_on(attempt: Tally) -> None:
    bank = Bank()
    pay = {"tool_calls": [{"name": "oa__purchase_pay",
                           "args": {"amount": GATED, "vendor": "ACME"}}]}
    for config in ({"hooks_bypassed": True}, {"hooks": {"bypassed": True}},
                   {"hooks": {"class_hooks": [], "hooks_bypassed": True}}):
        agent = make_agent(bank)
        agent.model_config_json = config
        result = await ReActEngine(ScriptedLLM([pay, {"answer": "x"}])).run(agent, "pay")
        assert result.status in ("completed", "blocked_build")
        assert all(e.get("hooks_bypassed") is None for e in result.trace)
    attempt.record("hooks_bypassed in an agent's model_config_json", bool(bank.payments))
    assert bank.payments == []


async def test_an_eval_run_says_on_every_event_that_hooks_were_bypassed() -> None:
    bank = Bank()
    llm = ScriptedLLM([{"tool_calls": [{"name": "oa__purchase_pay",
                                        "args": {"amount": GATED, "vendor": "ACME"}}]},
                       {"answer": "paid"}])
    result = await EvalEngine(llm).run(make_agent(bank, "buyer", "tests.nowhere:Missing"),
                                       "pay")
    assert result.status == "blocked_build"  # a broken declaration still does not run
    result = await EvalEngine(llm).run(make_agent(bank), "pay")
    assert bank.payments == [{"amount": float(GATED), "vendor": "ACME"}]
    assert result.trace and all(e["hooks_bypassed"] is True for e in result.trace)
    assert events(result.trace, "tool_result")[0]["hooks"] == []
