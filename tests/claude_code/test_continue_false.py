"""Claude Code's ``continue: false`` stops the whole run with its ``stopReason`` on every
engine path: ReAct, DAG steps, delegated children (their caller stops too), workflow tool
and agent nodes, and a run that went down before it ended. The hook scripts are
published-style and run unchanged; the real Claude Code runs the same ones for comparison.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from hookgate import Agent, ReActEngine, ScriptedLLM
from hookgate.engines import DAGEngine, DelegatingReActEngine, Delegation
from hookgate.engines.driver import STOP_KEY
from hookgate.workflows import WorkflowRunner, parse_workflow
from tests.claude_cli import ClaudeRun
from tests.claude_code.test_same_scripts import SCRIPTS, hook, shell_tool
from tests.fakes.anthropic import FakeAnthropic, Text, ToolUse, sequence

SETTINGS = {"hooks": {
    "PreToolUse": [{"matcher": "*", "hooks": [hook("freeze_window.sh")]}],
    "PostToolUse": [{"matcher": "Bash", "hooks": [hook("stop_after_deploy.py")]}],
}}
DEPLOY = {"command": "echo v2 > deployed.txt && echo deploy done", "description": "deploy"}
AFTER = {"command": "echo more > after.txt", "description": "after"}
DEPLOY_STOP = "Deploy finished: stopping for a human review"
FREEZE_STOP = "Change freeze in effect: no tool calls today"


def project(root: Path, *, frozen: bool = False) -> Path:
    where = root / "project"
    hooks_dir = where / ".claude" / "hooks"
    hooks_dir.mkdir(parents=True)
    for name in ("freeze_window.sh", "stop_after_deploy.py"):
        shutil.copy2(SCRIPTS / name, hooks_dir / name)
    (where / ".claude" / "settings.json").write_text(json.dumps(SETTINGS))
    if frozen:
        (where / ".claude" / "FREEZE").write_text("")
    return where


def coder(where: Path, agent_id: str = "coder", **config: Any) -> Agent:
    return Agent(id=agent_id, name=agent_id, instructions="", org_id="acme",
                 tools=[shell_tool(where)], model_config_json={
                     "hooks": {"claude_code": str(where / ".claude" / "settings.json")},
                     **config})


def ran(where: Path) -> dict[str, bool]:
    return {name: (where / name).exists() for name in ("deployed.txt", "after.txt")}


def call(args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "Bash", "args": args, "id": call_id}]}


def with_claude_code(root: Path, *, frozen: bool, first: dict[str, Any] | None = None
                     ) -> tuple[dict[str, bool], int]:
    where = project(root / "cc", frozen=frozen)
    second = AFTER if first is None else DEPLOY
    with FakeAnthropic(sequence(ToolUse("Bash", first or DEPLOY), ToolUse("Bash", second),
                                Text("done"))) as api:
        result = ClaudeRun(where, root / "cc" / "home", api.url).prompt(
            "ship it", tools="Bash")
        model_turns = len(api.requests)
    assert result.returncode == 0, result.stderr
    return ran(where), model_turns


async def test_react_stops_where_claude_code_stops(tmp_path: Path) -> None:
    cc_ran, cc_turns = with_claude_code(tmp_path, frozen=False)
    where = project(tmp_path / "hg")
    llm = ScriptedLLM([call(DEPLOY, "c1"), call(AFTER, "c2"), {"answer": "done"}])
    result = await ReActEngine(llm).run(coder(where), "ship it", user_id="alice")
    # The deploy ran, its PostToolUse hook stopped the session, nothing after it ran, and
    # neither asked the model again.
    assert cc_ran == ran(where) == {"deployed.txt": True, "after.txt": False}
    assert cc_turns == llm.calls == 1
    assert result.status == "session_blocked"
    assert DEPLOY_STOP in (result.error or "")
    assert result.answer is None


async def test_a_pre_tool_use_stop_also_refuses_its_own_call_unlike_claude_code(
        tmp_path: Path) -> None:
    first = {"command": "echo one > after.txt", "description": "first"}
    cc_ran, cc_turns = with_claude_code(tmp_path, frozen=True, first=first)
    where = project(tmp_path / "hg", frozen=True)
    llm = ScriptedLLM([call(first, "c1"), call(DEPLOY, "c2"), {"answer": "done"}])
    result = await ReActEngine(llm).run(coder(where), "ship it", user_id="alice")
    # Both stop the session at the first call and ask the model nothing more. Claude Code
    # (2.1.332) still runs the call whose PreToolUse hook said `continue: false`; hookgate
    # fails closed and does not (the deliberate difference the Claude Code guide states).
    assert cc_turns == llm.calls == 1
    assert cc_ran == {"deployed.txt": False, "after.txt": True}
    assert ran(where) == {"deployed.txt": False, "after.txt": False}
    assert result.status == "session_blocked"
    assert FREEZE_STOP in (result.error or "")
    assert not result.tool_events()[0]["allowed"]


async def test_a_dag_step_stops_the_plan_and_no_answer_is_written(tmp_path: Path) -> None:
    where = project(tmp_path)
    plan = {"plan": {"steps": [
        {"id": "deploy", "tool": "Bash", "args": DEPLOY, "depends_on": []},
        {"id": "after", "tool": "Bash", "args": AFTER, "depends_on": ["deploy"]},
        {"id": "sum", "question": "What happened?", "depends_on": ["after"]}]}}
    llm = ScriptedLLM([plan, {"answer": "a summary"}, {"answer": "done"}])
    result = await DAGEngine(llm).run(coder(where), "ship it", user_id="alice")
    assert ran(where) == {"deployed.txt": True, "after.txt": False}
    assert result.status == "session_blocked"
    assert DEPLOY_STOP in (result.error or "")
    assert llm.calls == 1  # the plan; no step question, no final answer
    assert [e["type"] for e in result.trace][-3:] == ["tool_result", "error", "done"]


async def test_steps_already_running_finish_and_no_new_step_starts(tmp_path: Path) -> None:
    where = project(tmp_path)
    slow = {"command": "sleep 0.5; echo slow > slow.txt", "description": "slow"}
    plan = {"plan": {"steps": [
        {"id": "deploy", "tool": "Bash", "args": DEPLOY, "depends_on": []},
        {"id": "slow", "tool": "Bash", "args": slow, "depends_on": []},
        {"id": "after", "tool": "Bash", "args": AFTER, "depends_on": ["deploy"]}]}}
    result = await DAGEngine(ScriptedLLM([plan, {"answer": "done"}])).run(
        coder(where), "ship it", user_id="alice")
    # The concurrent step was not cut off half-way: it ran to its end and was recorded.
    assert (where / "slow.txt").exists()
    assert ran(where) == {"deployed.txt": True, "after.txt": False}
    recorded = {e["tool_call_id"] for e in result.tool_events()}
    assert recorded == {"step_deploy", "step_slow"}
    assert result.status == "session_blocked"


async def test_a_delegate_that_is_stopped_stops_its_caller(tmp_path: Path) -> None:
    where = project(tmp_path)
    boss = Agent(id="boss", name="boss", instructions="", org_id="acme", tools=[],
                 model_config_json={"delegates": ["coder"]})
    models = {
        "boss": ScriptedLLM([{"tool_calls": [{"name": "call_agent", "id": "d1", "args": {
            "agent_id": "coder", "message": "ship it"}}]}, {"answer": "all done"}]),
        "coder": ScriptedLLM([call(DEPLOY, "c1"), call(AFTER, "c2"), {"answer": "shipped"}]),
    }
    engine = DelegatingReActEngine(models["boss"], delegation=Delegation(
        {"boss": boss, "coder": coder(where)}, lambda agent_id: models[agent_id]))
    result = await engine.run(boss, "release", user_id="alice")
    assert ran(where) == {"deployed.txt": True, "after.txt": False}
    end = next(e for e in result.trace if e["type"] == "delegate_end")
    assert end["status"] == "session_blocked" and DEPLOY_STOP in end["error"]
    # Claude Code's continue: false stops the whole session: the caller asks nothing more.
    assert result.status == "session_blocked"
    assert DEPLOY_STOP in (result.error or "")
    assert models["boss"].calls == 1 and models["coder"].calls == 1


def release(first: dict[str, Any]) -> dict[str, Any]:
    return {"id": "release", "as_agent": "coder", "nodes": [
        first, {"id": "after", "type": "tool", "tool": "Bash", "args": AFTER}],
        "edges": [{"from": first["id"], "to": "after"}]}


async def test_a_workflow_tool_node_stops_the_workflow(tmp_path: Path) -> None:
    where = project(tmp_path)
    wf = parse_workflow(release({"id": "deploy", "type": "tool", "tool": "Bash",
                                 "args": DEPLOY}))
    result = await WorkflowRunner({wf.id: wf}, {"coder": coder(where)},
                                  lambda _: ScriptedLLM([])).run("release", user_id="alice")
    assert ran(where) == {"deployed.txt": True, "after.txt": False}
    assert result.status == "session_blocked"
    assert DEPLOY_STOP in (result.error or "")


async def test_a_workflow_agent_node_that_is_stopped_stops_the_workflow(
        tmp_path: Path) -> None:
    where = project(tmp_path)
    wf = parse_workflow(release({"id": "ship", "type": "agent", "agent": "coder",
                                 "message": "ship it"}))
    models = {"coder": ScriptedLLM([call(DEPLOY, "c1"), {"answer": "shipped"}])}
    result = await WorkflowRunner({wf.id: wf}, {"coder": coder(where)},
                                  lambda agent_id: models[agent_id]).run(
        "release", user_id="alice")
    assert ran(where) == {"deployed.txt": True, "after.txt": False}
    node = result.state.extra["workflow"]["nodes"]["ship"] if result.state else {}
    assert node["status"] == "failed" and DEPLOY_STOP in node["reason"]
    assert "after" not in (result.state.extra["workflow"]["nodes"] if result.state else {})
    assert result.status == "session_blocked"
    assert DEPLOY_STOP in (result.error or "")


async def test_a_run_stopped_before_a_restart_ends_on_its_next_advance(
        tmp_path: Path) -> None:
    where = project(tmp_path)
    saved: list[str] = []

    class Store:
        async def save(self, state: Any) -> None:
            saved.append(state.to_json())

    llm = ScriptedLLM([call(DEPLOY, "c1"), call(AFTER, "c2"), {"answer": "done"}])
    await ReActEngine(llm, store=Store()).run(coder(where), "ship it", user_id="alice")
    # The checkpoint written right after the stopping call: the run had not ended yet.
    from hookgate.engines.state import RunState
    stopped = next(RunState.from_json(s) for s in saved
                   if STOP_KEY in RunState.from_json(s).extra)
    assert not stopped.finished
    again = ScriptedLLM([call(AFTER, "c2"), {"answer": "done"}])
    result = await ReActEngine(again).resume(coder(where), stopped)
    assert result.status == "session_blocked" and DEPLOY_STOP in (result.error or "")
    assert again.calls == 0
    assert ran(where) == {"deployed.txt": True, "after.txt": False}
