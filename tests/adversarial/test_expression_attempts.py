"""Expressions that would stall the server (issue 26, class 4): huge powers, shifts and
repetitions, nested comprehensions, deep nesting, a megabyte of source, NaN and inf. Each is
refused when it is declared (a standing rule over HTTP and the CLI, a hook, a quorum entry, a
workflow, ``hookgate check``) or stopped when it is evaluated, where it fails closed: a
standing rule asks a person, a quorum entry picks the call, a hook runs, a workflow condition
fails its node; and the server keeps serving other orgs meanwhile."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate import Agent, ScriptedLLM, tool
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.approvals.quorum import QuorumRule, requirement_for
from hookgate.approvals.service import ApprovalAsk
from hookgate.expressions import Expression, ExpressionInvalid, ExpressionTooCostly
from hookgate.expressions.values import MappingView
from hookgate.hooks.errors import HookBuildError
from hookgate.matching import Condition
from hookgate.storage.database import Database
from hookgate.storage.runs import DatabaseRunStore
from hookgate.workflows import WorkflowError, WorkflowRunner, parse_workflow
from tests.adversarial.conftest import Tally
from tests.catalog.test_declarative_hooks import buyer, run
from tests.engines.world import Bank, events, make_agent, services
from tests.live_server import live_server
from tests.portal.steps import WAIT_S, run_status, wait_finished
from tests.server.demo_world import TOKENS, auth, world
from tests.server.test_quorum import _pending

#: Expressions that could only ever be stopped: refused when declared.
CONSTANT = {
    "a 22-million-bit power": "3900000**1000000 < 0",
    "a power tower": "9**9**9 > 0",
    "a gigabyte of text": "'a'*10**9 == ''",
    "a hundred million items": "[0]*10**8 == []",
    "a billion-bit shift": "2<<10**9 > 0",
    "nested comprehensions": "[[y for y in [0]*9999] for x in [0]*9999] == []",
    "a repeated repetition": "str([[0]*99999]*99999) == ''",
    "a wide format": "f'{1:>999999999}' == ''",
    "printf padding": "'%999999999d' % 1 == ''",
    "a huge rounding": "round(5, -10**7) == 0",
    "NaN": "float('nan') < 1",
    "inf arithmetic": "1e308 * 10 > 0",
    "inf minus inf": "float('inf') - float('inf') < 1",
    "a megabyte of source": "1 + " * 262_144 + "1 > 0",
    "deep nesting": "-" * 1500 + "1 < 0",
    "deep brackets": "[" * 100 + "]" * 100 + " == []",
}
#: The same attacks made from the call's arguments: they pass declaration and are stopped
#: when evaluated (``args.amount`` is 3,900,000, ``args.vendor`` is "ACME").
AT_RUN_TIME = {
    "a power of an argument": "int(args.amount) ** 1000000 < 0",
    "a shift by an argument": "1 << int(args.amount) * 1000 > 0",
    "a repetition by an argument": "args.vendor[:1] * int(args.amount) * 1000 == ''",
    "a list repeated by an argument": "[0] * int(args.amount) * 100 == []",
    "comprehensions over an argument":
        "[[x for x in args.vendor * 9999] for y in args.vendor * 9999] == []",
    "NaN from an argument": "float('n' + args.vendor[:1] + 'n') < 1",
    "inf from an argument": "float(args.amount) * 1e308 > 0",
}
ARGS = {"amount": 3900000, "vendor": "ACME"}


@pytest.mark.parametrize("name", list(CONSTANT))
def test_an_expression_that_could_only_be_stopped_is_refused_when_declared(
        name: str, attempt: Tally) -> None:
    with pytest.raises(HookBuildError) as refused:
        Condition(CONSTANT[name])
    attempt.record(f"declared when: {name}", False)
    assert "refused" in str(refused.value) or "characters long" in str(refused.value) \
        or "nests deeper" in str(refused.value) or "parts" in str(refused.value), refused.value


@pytest.mark.parametrize("name", list(AT_RUN_TIME))
def test_an_expression_made_costly_by_the_arguments_is_stopped_when_evaluated(
        name: str, attempt: Tally) -> None:
    expression = Expression.parse(AT_RUN_TIME[name])
    with pytest.raises(ExpressionTooCostly):
        expression.evaluate({"args": MappingView(ARGS)}, {"int": int, "float": float})
    attempt.record(f"evaluated when: {name}", False)


def test_a_megabyte_expression_is_refused_before_it_is_read() -> None:
    with pytest.raises(ExpressionInvalid, match="1048576 characters long"):
        Expression.parse("x" * (1 << 20))


# -- a declarative hook's when ------------------------------------------------------------------


async def test_a_hook_whose_when_is_stopped_runs_and_blocks_the_call(attempt: Tally) -> None:
    agent = buyer(command_hooks=[{
        "event": "PreToolUse", "matcher": "oa__purchase_pay",
        "when": "int(args.amount) ** 1000000 < 0 and args.vendor == 'Nobody'",
        "command": "echo 'checked' >&2; exit 2", "name": "spend-check",
    }])
    r = await run(agent, ("oa__purchase_pay", {"amount": 3900000, "vendor": "ACME"}))

    attempt.record("hook when: a power of an argument", r.outcome()["allowed"] is not False)
    assert r.outcome()["allowed"] is False
    assert any("could not be evaluated" in s and "exceed 4096 bits" in s
               for s in r.outcome()["side_effects"]), r.outcome()["side_effects"]


def test_a_hook_whose_when_could_only_be_stopped_is_refused_by_hookgate_check(
        tmp_path: Path, attempt: Tally) -> None:
    example = Path(__file__).parents[2] / "src/hookgate/examples/purchasing.yaml"
    text = example.read_text().replace(
        "        class_hooks:\n",
        "        command_hooks:\n"
        "          - {event: PreToolUse, name: stall, command: 'true',\n"
        "             when: \"3900000**1000000 < 0\"}\n"
        "        class_hooks:\n", 1)
    assert "command_hooks" in text
    (tmp_path / "hookgate.yaml").write_text(text)
    done = subprocess.run([sys.executable, "-m", "hookgate.cli.main", "check", "-c",
                           "hookgate.yaml"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)
    attempt.record("hookgate check: a 22-million-bit power", done.returncode == 0)
    assert done.returncode == 1, done.stdout
    assert "this power would exceed 4096 bits" in done.stderr, done.stderr


# -- a quorum entry's when ----------------------------------------------------------------------


def test_a_quorum_entry_whose_when_is_stopped_picks_the_call(attempt: Tally) -> None:
    agent = make_agent(Bank())
    agent = dataclasses.replace(agent, confirmation_approver_scope="org_members",
                                approval_quorum=(QuorumRule.parse(
        "oa__purchase_pay", "int(args.amount) ** 1000000 < 0", 2, None),))
    ask = ApprovalAsk(agent=agent, run_id="run_1", tool_call_id="c1",
                      tool_name="oa__purchase_pay", args={"amount": 3900000, "vendor": "ACME"},
                      args_sha256="x", user_id="alice", org_id=agent.org_id)
    need = requirement_for(ask)
    attempt.record("quorum when: a power of an argument", need.approvals_required < 2)
    assert need.approvals_required == 2
    assert any("could not be evaluated" in r and "4096 bits" in r for r in need.reasons)
    with pytest.raises(HookBuildError, match="can never be evaluated"):
        QuorumRule.parse("oa__purchase_pay", "9**9**9 > 0", 2, None)


# -- workflow conditions ------------------------------------------------------------------------


def test_a_workflow_with_a_condition_that_could_only_be_stopped_is_refused(
        attempt: Tally) -> None:
    for name in ("a 22-million-bit power", "nested comprehensions", "a megabyte of source"):
        with pytest.raises(WorkflowError, match="node 'cheap'"):
            parse_workflow({"id": "w", "as_agent": "buyer", "nodes": [
                {"id": "cheap", "type": "condition", "expr": CONSTANT[name]}]})
        attempt.record(f"workflow condition declared: {name}", False)


async def test_a_workflow_condition_made_costly_by_the_input_fails_its_step(
        db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    bank = Bank()
    workflow = parse_workflow({"id": "w", "as_agent": "buyer", "nodes": [
        {"id": "cheap", "type": "condition", "expr": "int(input) ** 1000000 < 0"},
        {"id": "pay", "type": "tool", "tool": "oa__purchase_pay",
         "args": {"amount": 100, "vendor": "ACME"}}],
        "edges": [{"from": "cheap", "to": "pay", "when": False}]})
    runner = WorkflowRunner({"w": workflow}, {"buyer": make_agent(bank)},
                            lambda _: ScriptedLLM([]), store=DatabaseRunStore(db),
                            **services(db, approvals))
    result = await runner.run("w", "3900000", user_id="alice")
    attempt.record("workflow condition: a power of the input", bool(bank.payments))
    assert bank.payments == []
    cheap = next(e for e in events(result.trace, "node_result") if e["node_id"] == "cheap")
    assert cheap["status"] == "failed" and "exceed 4096 bits" in cheap["reason"]
    skipped = events(result.trace, "step_skipped")
    assert [e["node_id"] for e in skipped] == ["pay"]


# -- standing rules through a real server -------------------------------------------------------


def _rule(c: httpx.Client, when: str) -> httpx.Response:
    return c.post("/api/approval-rules", headers=auth("olivia"), json={
        "agent_id": "buyer", "tool_name": "oa__purchase_pay", "scope": "org", "when": when})


def _with_another_org(deployment: Any, turns: list[dict[str, Any]]) -> Any:
    """Adds 'seller' in org 'other' (mallory's), whose runs answer without a tool."""
    @tool
    async def crm__note(text: str) -> str:
        """Write a note."""
        return "noted"

    deployment.agents["seller"] = Agent(
        id="seller", name="Seller", instructions="Sell.", tools=[crm__note], org_id="other",
        owner_user_id="mallory")
    deployment.model_for = lambda agent_id: ScriptedLLM(
        turns if agent_id == "buyer" else [{"answer": "sold"}])
    return deployment


@pytest.mark.both_databases
def test_a_rule_whose_when_could_only_be_stopped_is_refused_over_http_and_the_cli(
        database_url: str, attempt: Tally) -> None:
    deployment, _bank = world(database_url, scope="org_members")
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        for name, when in CONSTANT.items():
            r = _rule(c, when)
            # A megabyte is over the server's body limit before it is an expression.
            refused = 413 if len(when) > 262_144 else 422
            attempt.record(f"HTTP rule when: {name}", r.status_code != refused)
            assert r.status_code == refused, (name, r.status_code, r.text[:300])
            assert "when" in r.json()["error"] or "expression" in r.json()["error"] \
                or "request body" in r.json()["error"], r.text
        r = _rule(c, "1 + " * 1000 + "1 > 0")
        assert r.status_code == 422 and "2000 characters" in r.json()["error"], r.text
        made = subprocess.run(
            [sys.executable, "-m", "hookgate.cli.main", "rules", "create", "--agent", "buyer",
             "--tool", "oa__purchase_pay", "--scope", "org", "--when", CONSTANT["a power tower"],
             "--url", srv.url, "--token", TOKENS["olivia"]],
            capture_output=True, text=True, timeout=60)
        attempt.record("CLI rule when: a power tower", made.returncode == 0)
        assert made.returncode != 0
        assert "this power would exceed 4096 bits" in " ".join(made.stderr.split()), made.stderr
        assert c.get("/api/approval-rules", headers=auth("olivia")).json() == []


@pytest.mark.both_databases
def test_a_rule_whose_when_is_stopped_asks_a_person_while_other_orgs_are_served(
        database_url: str, attempt: Tally) -> None:
    turns = [{"tool_calls": [{"id": "big", "name": "oa__purchase_pay",
                              "args": {"amount": 3900000, "vendor": "ACME"}}]},
             {"answer": "done"}]
    deployment, bank = world(database_url, scope="org_members")
    deployment = _with_another_org(deployment, turns)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        made = [_rule(c, when) for when in AT_RUN_TIME.values()]
        assert [r.status_code for r in made] == [201] * len(made), [r.text for r in made]
        run_id = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
                        headers=auth("alice")).json()["run_id"]
        # Meanwhile another org's run starts and completes.
        other = c.post("/api/runs", json={"agent_id": "seller", "message": "sell"},
                       headers=auth("mallory")).json()["run_id"]
        assert _finished(c, other, "mallory") == "completed"
        pending = _pending(c, "big")
        attempt.record("HTTP rule when at run time: every argument attack",
                       bank.payments != [] or pending is None)
        trace = c.get(f"/api/runs/{run_id}", headers=auth("alice")).json()["trace"]
        skipped = [e for e in trace if e["type"] == "standing_rule_skipped"]
        assert sorted(e["rule_id"] for e in skipped) == sorted(r.json()["id"] for r in made)
        assert all("a person is asked" in e["reason"] for e in skipped)
        assert any("exceed 4096 bits" in e["reason"] for e in skipped)
        c.post(f"/api/confirmations/{pending['id']}/respond", json={"decision": "reject"},
               headers=auth("alice")).raise_for_status()
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == []
        uses = {x["uses"] for x in c.get("/api/approval-rules", headers=auth("olivia")).json()}
        assert uses == {0}


def _finished(c: httpx.Client, run_id: str, user: str) -> str:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        status = run_status(c, run_id, user)
        if status not in ("running", "awaiting_approval"):
            return status
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish")


def test_a_thread_held_back_spends_none_of_an_expressions_time() -> None:
    # The time limit is the evaluating thread's CPU time: a machine too loaded to run the
    # thread for a while (here: the thread sleeping past the limit) refuses nothing, where a
    # wall clock refused a constant as "longer than 1 s" on a loaded machine.


    from hookgate.expressions.budget import Budget
    from hookgate.expressions.limits import ExpressionLimits

    budget = Budget(ExpressionLimits(max_seconds=0.05))
    time.sleep(0.3)
    budget.charge(1)


def test_a_full_collection_in_the_evaluating_thread_spends_none_of_an_expressions_time(
        ) -> None:
    # A full collection of the cyclic garbage collector scales with the process's heap, not
    # with the expression: one running inside `".log" in args.command` in a large process
    # could make the rule fail closed and ask a person about `echo`. Here the heap is made
    # large enough that one full collection takes longer than the limit on its own.
    import gc

    from hookgate.expressions.budget import Budget
    from hookgate.expressions.limits import ExpressionLimits

    heap = [[i] for i in range(300_000)]
    budget = Budget(ExpressionLimits(max_seconds=0.002))
    before = time.thread_time()
    gc.collect()
    assert time.thread_time() - before > 0.002, "the collection did not outlast the limit"
    budget.charge(1)
    del heap


def test_work_that_never_ends_still_runs_out_of_time() -> None:
    from hookgate.expressions.budget import Budget
    from hookgate.expressions.errors import ExpressionTooCostly
    from hookgate.expressions.limits import ExpressionLimits

    budget = Budget(ExpressionLimits(max_seconds=0.05, max_work=10**12))
    with pytest.raises(ExpressionTooCostly, match=r"ran longer than 0\.05 s"):
        while True:
            sum(range(1000))  # the thread's own CPU time goes by
            budget.charge(1)
