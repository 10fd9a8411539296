""""Withheld" means withheld: a PostToolUse hook that fails closed while quoting the tool's
raw output (a card number) in what it raises or prints, for every hook kind (class, Python,
command, HTTP) and on every engine path. The model reads a fixed sentence naming the hook
and the failure kind; the trace keeps the hook's output for admins, masked."""

from __future__ import annotations

import json
import shlex
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from hookgate import (
    Agent,
    DAGEngine,
    HookContext,
    HookResult,
    PostToolUseHook,
    ReActEngine,
    ScriptedLLM,
    Tool,
    tool,
)
from hookgate.engines import DelegatingReActEngine, Delegation
from hookgate.hooks.registry import withheld_message
from hookgate.workflows import WorkflowRunner, parse_workflow
from tests.adversarial.conftest import Tally

CARD = "4111 1111 1111 1111"
DIGITS = CARD.replace(" ", "")


def card_tool() -> Tool:
    @tool
    async def crm__card(customer: str) -> str:
        """The customer's card on file."""
        return f"{customer} pays with card {CARD}, cvc 737"

    return crm__card


class EchoingFailure(PostToolUseHook):
    """Fails closed and quotes the tool's output in its error, as careless hooks do."""

    name = "echoing_failure"

    async def execute(self, ctx: HookContext) -> HookResult:
        raise RuntimeError(f"could not classify output {ctx.tool_result!r}")


def python_failure(event: dict[str, Any]) -> None:
    """A declared Python hook that fails quoting the tool's response."""
    raise ValueError(f"unexpected tool response: {event['tool_response']}")


class _EchoHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        reply = f"cannot store {body['tool_response']}".encode()
        self.send_response(500)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def echo_url() -> Iterator[str]:
    """A real HTTP hook endpoint on loopback that fails with the tool output in its body."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


COMMAND = (f"{shlex.quote(sys.executable)} -c \"import json,sys; e=json.load(sys.stdin); "
           "print(e['tool_response']); sys.stderr.write(str(e['tool_response'])); "
           "sys.exit(1)\"")


def hooks_of(kind: str, url: str) -> tuple[dict[str, Any], str]:
    """The agent's hook declaration for one failing hook of ``kind``, and its name."""
    if kind == "class":
        return {"class_hooks": [f"{__name__}:EchoingFailure"]}, "echoing_failure"
    entry: dict[str, Any] = {"event": "PostToolUse", "name": f"{kind}_failure"}
    if kind == "python":
        return {"python_hooks": [{**entry, "function": f"{__name__}:python_failure"}]}, (
            "python_failure")
    if kind == "command":
        return {"command_hooks": [{**entry, "command": COMMAND}]}, "command_failure"
    return {"http_hooks": [{**entry, "url": url}]}, "http_failure"


def card_agent(kind: str, url: str, agent_id: str = "clerk", **config: Any) -> tuple[
        Agent, str]:
    hooks, name = hooks_of(kind, url)
    return Agent(id=agent_id, name=agent_id, instructions="", tools=[card_tool()],
                 org_id="acme", model_config_json={"hooks": hooks, **config}), name


class Watching:
    """A scripted model that records every message it is shown."""

    def __init__(self, *turns: dict[str, Any]) -> None:
        self.turns, self.shown = list(turns), []

    def __call__(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        self.shown.append(json.dumps(messages))
        return self.turns.pop(0) if self.turns else {"answer": "done"}

    def llm(self) -> ScriptedLLM:
        return ScriptedLLM(self)


LOOKUP = {"name": "crm__card", "args": {"customer": "Globex"}}


def assert_withheld(outcome: dict[str, Any], hook: str, shown: list[str]) -> None:
    assert outcome["status"] == "withheld" and outcome["blocked_by"] == hook
    assert outcome["observation"] == withheld_message(hook, outcome["observation"].split(
        f"hook '{hook}' ")[1].split(" and fails closed")[0])
    assert outcome["observation"].startswith(
        f"Tool output withheld: the tool ran, but PostToolUse hook '{hook}' failed (")
    for text in [*shown, outcome["observation"], outcome["error"] or ""]:
        assert DIGITS not in text.replace(" ", "") and "737" not in text
    [failed] = [h for h in outcome["hooks"] if h["kind"] == "failed"]
    assert DIGITS not in failed["detail"].replace(" ", "")
    # Admins see what the hook said, masked.
    assert "••••1111" in failed["admin_output"] and DIGITS not in failed[
        "admin_output"].replace(" ", "")


def leaked(outcome: dict[str, Any], shown: list[str]) -> bool:
    return any(DIGITS in t.replace(" ", "") for t in [*shown, outcome["observation"]])


@pytest.mark.parametrize("kind", ["class", "python", "command", "http"])
async def test_react_a_failing_post_hook_never_shows_the_model_the_output(
        kind: str, echo_url: str, attempt: Tally) -> None:
    agent, hook = card_agent(kind, echo_url)
    model = Watching({"tool_calls": [LOOKUP]})
    result = await ReActEngine(model.llm()).run(agent, "card?")
    [outcome] = result.tool_events()
    attempt.record(f"react: {kind} hook failure quoting the tool output",
                   leaked(outcome, model.shown))
    assert_withheld(outcome, hook, model.shown)
    assert len(model.shown) == 2  # the model did get the turn after the call


async def test_dag_a_failing_post_hook_never_shows_the_model_the_output(
        echo_url: str, attempt: Tally) -> None:
    agent, hook = card_agent("command", echo_url)
    model = Watching({"plan": {"steps": [{"id": "c", "tool": "crm__card",
                                          "args": {"customer": "Globex"}}]}})
    result = await DAGEngine(model.llm()).run(agent, "card?")
    [outcome] = result.tool_events()
    attempt.record("dag: hook failure quoting the tool output", leaked(outcome, model.shown))
    assert_withheld(outcome, hook, model.shown)


async def test_delegation_a_delegates_failing_post_hook_leaks_to_neither_model(
        echo_url: str, attempt: Tally) -> None:
    clerk, hook = card_agent("python", echo_url)
    boss = Agent(id="boss", name="boss", instructions="", tools=[], org_id="acme",
                 model_config_json={"delegates": ["clerk"]})
    models = {"boss": Watching({"tool_calls": [{"name": "call_agent", "args": {
        "agent_id": "clerk", "message": "card of Globex"}}]}),
        "clerk": Watching({"tool_calls": [LOOKUP]},
                          {"answer": "I could not read the card."})}
    engine = DelegatingReActEngine(models["boss"].llm(), delegation=Delegation(
        {"boss": boss, "clerk": clerk}, lambda a: models[a].llm()))
    result = await engine.run(boss, "card?", org_id="acme")
    [end] = [e for e in result.trace if e["type"] == "delegate_end"]
    [outcome] = [e for e in end["trace"] if e["type"] == "tool_result"]
    shown = models["boss"].shown + models["clerk"].shown
    attempt.record("delegation: hook failure quoting the tool output", leaked(outcome, shown))
    assert_withheld(outcome, hook, shown)


async def test_workflow_a_failing_post_hook_never_feeds_the_output_on(
        echo_url: str, attempt: Tally) -> None:
    clerk, hook = card_agent("http", echo_url)
    workflow = parse_workflow({"id": "w", "as_agent": "clerk", "nodes": [
        {"id": "card", "type": "tool", "tool": "crm__card", "args": {"customer": "Globex"}},
        {"id": "say", "type": "agent", "agent": "writer", "message": "Card: {{ card }}"}],
        "edges": [{"from": "card", "to": "say"}]})
    writer = Agent(id="writer", name="writer", instructions="", tools=[], org_id="acme")
    model = Watching({"answer": "noted"})
    result = await WorkflowRunner({"w": workflow}, {"clerk": clerk, "writer": writer},
                                  lambda _a: model.llm()).run("w")
    [outcome] = result.tool_events()
    attempt.record("workflow: hook failure quoting the tool output",
                   leaked(outcome, model.shown))
    assert_withheld(outcome, hook, model.shown)
    assert DIGITS not in (result.answer or "").replace(" ", "")

#: The card tool as a configuration names it (``module:attribute``).
crm__card = card_tool()
