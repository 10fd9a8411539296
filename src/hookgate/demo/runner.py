"""Runs the demo: the server, a demo run that reaches the gate, and the run's story in the
terminal until someone approves in the browser or with `hookgate approvals approve`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from hookgate.app import build_server
from hookgate.approvals.wording import numbers_text, reason_texts
from hookgate.demo.event_view import EventView
from hookgate.demo.world import DEMO_MESSAGE, DemoData, demo_deployment
from hookgate.runtime.runtime import Runtime
from hookgate.server.serving import listen

#: The walkthrough's approve-with-edits: the large payment lowered, with a word for the model.
EDITED_AMOUNT = 40000
EDIT_MESSAGE = "40,000 now; the rest once the hardware is delivered"
#: The walkthrough's rejection: the words the model reads with it.
REJECT_MESSAGE = "Not this quarter; ask finance first"
#: The decision the demo offers to remember: ACME payments up to 100,000, for a day.
REMEMBER = ("--remember agent_user --when 'args.vendor == \"ACME\" and args.amount <= "
            "100000' --expires-in 86400")
#: The order the standing rule approves once it exists.
SECOND_MESSAGE = "Pay ACME the 70,000 for the Q4 hardware order."


async def run_demo(console: Console, *, host: str, port: int, data: DemoData,
                   data_note: str, keep_serving: bool) -> str:
    """Serve, start the demo run, narrate it; returns the run's final status."""
    url = f"http://{host}:{port}"
    sock = listen(host, port)  # first: a busy port is refused before anything is made
    deployment, token = demo_deployment(data.directory, url)
    server, runtime = build_server(deployment, host, port)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if serving.done():
            serving.result()
            raise RuntimeError(f"the server did not start on {url}")
        await asyncio.sleep(0.05)

    console.print(Panel.fit(
        "[bold]hookgate demo[/] — a purchasing agent whose payments above 50,000 need a "
        "person's approval. Sign in to the inbox with the token (new each time the demo "
        "starts).", border_style="cyan"))
    # Things to copy are printed outside any box and never wrapped, so a copy is whole.
    _copyable(console, "Inbox:  ", f"{url}/")
    _copyable(console, "Token:  ", token)
    _copyable(console, "Data:   ", str(data.file))
    console.print(f"        [dim]{escape(data_note)}[/]", highlight=False, soft_wrap=True)

    state = await runtime.runs.start("buyer", DEMO_MESSAGE, user_id="alice", org_id="acme")
    console.print(f"[dim]run {state.run_id}:[/] {DEMO_MESSAGE}")
    view = EventView(console)
    status = "unknown"
    asked: list[str] = []
    async for event in runtime.runs.bus.subscribe(state.run_id):
        view.show(event)
        if event.type == "confirmation_pending":
            rid = event.data["request_id"]
            context = await _context_text(runtime, rid)
            console.print(Panel.fit(
                context +
                "Waiting for a person. Approve or reject it in the browser, or from "
                "another terminal with the commands below.",
                title="approval needed", border_style="yellow"))
            _copyable(console, "  ", f"{url}/#/confirmations/{rid}")
            _copyable(console, "  ",
                      f"hookgate approvals show {rid} --url {url} --token {token}")
            _copyable(console, "  ",
                      f"hookgate approvals approve {rid} --url {url} --token {token}")
            console.print("  or reject it (the payment is not made; the agent reads your "
                          "message):", highlight=False)
            _copyable(console, "  ",
                      f"hookgate approvals reject {rid} --message "
                      f"{shlex.quote(REJECT_MESSAGE)} --url {url} --token {token}")
            console.print("  [dim]or approve a lowered amount (the agent is told what you "
                          "changed):[/]")
            _copyable(console, "  ",
                      f"hookgate approvals approve {rid} --set amount={EDITED_AMOUNT} "
                      f"--message {shlex.quote(EDIT_MESSAGE)} --url {url} --token {token}")
            console.print("  or approve and remember (later ACME payments up to 100,000 "
                          "go through without asking):", highlight=False)
            _copyable(console, "  ", f"hookgate approvals approve {rid} {REMEMBER} "
                                     f"--url {url} --token {token}")
            asked.append(rid)
        if event.type == "done":
            status = str(event.data.get("status"))
    if view.status is None and server.should_exit:
        # Ctrl-C while the run waited: the server stopped first, so the run did not finish;
        # say so (and nothing that asks for a Ctrl-C again), then let the server end.
        _stopped(console, asked, data)
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        return "stopped"
    if view.approved_by_rule and not asked:
        console.print(
            f"[bold]No one was asked:[/] standing rule {', '.join(view.approved_by_rule)} from "
            "an earlier demo approved the payment. Start with --fresh to see the approval.",
            highlight=False, soft_wrap=True)
    if view.outcome == "not_approved":
        console.print(f"[bold]run finished: {status}, but a payment was not approved[/]")
    else:
        console.print(f"[bold]run finished: {status}[/]")
    status = await _with_standing_rule(console, runtime, asked) or status
    if keep_serving:
        console.print(f"The server keeps running at {url}/ — press Ctrl-C to stop.")
    else:
        server.should_exit = True
    with contextlib.suppress(asyncio.CancelledError):
        await serving
    return status


async def _with_standing_rule(console: Console, runtime: Runtime, asked: list[str]
                              ) -> str | None:
    """When the approver remembered the decision, a second order runs and the rule approves
    it without a card; its status (None when no rule was made)."""
    rules = [r for r in await runtime.approvals.rules.list_for_org("acme", active_only=True)
             if r.from_request_id in asked]
    if not rules:
        return None
    rule = rules[0]
    console.print(Panel.fit(
        f"Standing rule {rule.id} by {escape(rule.created_by)}: {escape(rule.tool_name)} "
        f"when {escape(rule.when or 'always')}. A second order runs now; the rule approves "
        "it without asking anyone. List or revoke rules on the inbox's Rules page or with "
        "`hookgate rules`.", title="approve and remember", border_style="green"))
    state = await runtime.runs.start("buyer", SECOND_MESSAGE, user_id="alice", org_id="acme")
    console.print(f"[dim]run {state.run_id}:[/] {SECOND_MESSAGE}")
    view = EventView(console)
    status = "unknown"
    async for event in runtime.runs.bus.subscribe(state.run_id):
        view.show(event)
        if event.type == "done":
            status = str(event.data.get("status"))
    console.print(f"[bold]second run finished: {status}[/]")
    return status


def _stopped(console: Console, asked: list[str], data: DemoData) -> None:
    """The last lines after a Ctrl-C that came before the run finished."""
    waiting = f"; request {', '.join(asked)} was not decided" if asked else ""
    console.print(f"[bold]demo stopped before its run finished{escape(waiting)}.[/] The "
                  f"server has stopped; its data is in {escape(str(data.file))}.",
                  highlight=False, soft_wrap=True)


def _copyable(console: Console, label: str, text: str) -> None:
    console.print(Text.assemble((label, "bold"), text), soft_wrap=True, highlight=False)


async def _context_text(runtime: Runtime, request_id: str) -> str:
    """What the approver will read: the user's words, why a person is asked, the numbers."""
    request = await runtime.approvals.store.get(request_id)
    if request is None:
        return ""
    view = request.to_dict()
    context = view["context"]
    lines = [f"User asked:  {escape(context.get('user_message') or '')}",
             f"Tool:        {escape(request.tool_name)} — "
             f"{escape(context.get('tool_description') or '')}"]
    lines += [f"Why:         {escape(text)}" for text in reason_texts(context)]
    exact = json.dumps(request.args, ensure_ascii=False)
    grouped = numbers_text(context.get("numbers") or [])
    lines.append(f"Arguments:   {escape(exact)}" + (f"  ({grouped})" if grouped else ""))
    return "\n".join(lines) + "\n\n"
