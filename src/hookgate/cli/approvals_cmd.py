"""``hookgate approvals list | show ID | approve ID | reject ID``: read and decide requests on
a running server, with the context an approver needs (the user's words, the tool, why)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.text import Text

from hookgate.approvals.wording import changes_text, numbers_text, reason_texts
from hookgate.cli.app import app, console, fail
from hookgate.durations import duration_text

approvals_app = typer.Typer(help="Confirmation requests on a running server.",
                            no_args_is_help=True)
app.add_typer(approvals_app, name="approvals")

UrlOption = Annotated[str, typer.Option(envvar="HOOKGATE_URL",
                                        help="The server's base URL.")]
TokenOption = Annotated[str | None, typer.Option(envvar="HOOKGATE_TOKEN",
                                                 help="Your API token.", show_default=False)]
ReasonOption = Annotated[str | None, typer.Option(help="Why (recorded with the decision).")]
MessageOption = Annotated[str | None, typer.Option(
    help="Words for the agent's model, read with the decision.")]
ArgsOption = Annotated[str | None, typer.Option(
    "--args", help="Approve these arguments instead (a JSON object), checked against the "
                   "tool's schema.", show_default=False)]
SetOption = Annotated[list[str] | None, typer.Option(
    "--set", help="Change one argument before approving: path=value (value as JSON, else "
                  "text; a.b for nested keys). Repeatable.", show_default=False)]


def _call(method: str, url: str, path: str, token: str | None,
          body: dict[str, Any] | None = None) -> Any:
    import httpx  # not at the top: --help should not pay for the HTTP client

    from hookgate.cli.credentials import CredentialsError, saved_session
    from hookgate.cli.server_url import NotAServerUrl, server_base

    try:
        url = server_base(url)
    except NotAServerUrl as exc:
        fail(str(exc), 2)
    if not token:
        # The session `hookgate login` kept for this server, if any.
        try:
            token = saved_session(url)
        except CredentialsError as exc:
            fail(str(exc), 2)
    if not token:
        fail("give --token, set HOOKGATE_TOKEN, or sign in with `hookgate login`", 2)
    try:
        r = httpx.request(method, url + path, json=body, timeout=30,
                          headers={"Authorization": f"Bearer {token}"})
    except httpx.HTTPError as exc:
        fail(f"cannot reach the server at {url}: {exc} (is `hookgate serve` running there? "
             "Give its address with --url or HOOKGATE_URL)")
    if r.status_code >= 400:
        try:
            message = r.json().get("error") or r.text
        except (json.JSONDecodeError, AttributeError):
            message = r.text
        fail(f"{r.status_code}: {message}")
    return r.json()


#: The same client for the other command groups of a running server (``hookgate rules``).
call_api = _call


@approvals_app.command("list")
def list_(
    url: UrlOption = "http://127.0.0.1:8000",
    token: TokenOption = None,
    status: Annotated[str, typer.Option(help="pending, approved, rejected, expired, "
                                             "cancelled, or all")] = "pending",
) -> None:
    """List confirmation requests of your org.

    One request per line, its id first and never cut short (copy it into `approve`), then
    its arguments on the next line.
    """
    path = "/api/confirmations" + ("" if status == "all" else f"?status={status}")
    items = _call("GET", url, path, token)
    if not items:
        console.print(f"no {status} requests")
    for it in items:
        left = (f", {duration_text(it['seconds_left'])} left" if it["status"] == "pending"
                else "")
        who = f", requested by {it['requested_by']}" if it.get("requested_by") else ""
        head = Text.assemble(
            (it["id"], "bold"), f"  {it['status']}  ", (it["payload"]["tool_name"], "bold"),
            f"  agent {it.get('agent_name') or it['agent_id']}{who}{left}")
        console.print(head, soft_wrap=True, highlight=False)
        # Text, not markup: arguments such as "[red]ACME[/red]" show as they will run.
        console.print(Text(f"    {_arguments(it)}", style="dim"), soft_wrap=True,
                      highlight=False)
        for reason in reason_texts(it.get("context")):
            console.print(Text(f"    why: {reason}"), soft_wrap=True, highlight=False)
        if it.get("can_decide"):
            console.print(Text(f"    you may: {_actions(it)}"), soft_wrap=True, highlight=False)
        if it.get("changes"):
            console.print(Text(f"    edited: {changes_text(it['changes'])}"), soft_wrap=True,
                          highlight=False)
        for line in _followup_lines(it):
            console.print(line, soft_wrap=True, highlight=False)


def _actions(item: dict[str, Any]) -> str:
    """What the caller can do with a pending request, as the server answers it."""
    found = []
    if item.get("can_approve"):
        found.append("approve")
    if item.get("can_edit"):
        found.append("approve with edits (--args/--set)")
    found.append("reject")
    return ", ".join(found)


def _followup_lines(item: dict[str, Any]) -> list[Text]:
    """Nobody reachable (never silent), then the reminders and escalation so far."""
    lines = []
    if item.get("unreachable"):
        lines.append(Text.assemble("    ", ("UNREACHABLE", "bold red"),
                                   f": {item['unreachable']}"))
    f = item.get("followup") or {}
    done = []
    if f.get("reminders_sent"):
        done.append(f"reminded {f['reminders_sent']}x (last {f.get('last_reminded_at')})")
    if f.get("escalated_at"):
        done.append(f"escalated to {', '.join(f.get('escalated_to') or []) or 'nobody'} "
                    f"at {f['escalated_at']}")
    if done:
        lines.append(Text(f"    {'; '.join(done)}", style="dim"))
    return lines


def _arguments(item: dict[str, Any]) -> str:
    """The exact arguments (as JSON), then the large numbers grouped for reading."""
    exact = json.dumps(item["payload"]["args"], ensure_ascii=False, allow_nan=False)
    grouped = numbers_text((item.get("context") or {}).get("numbers") or [])
    return f"{exact}  ({grouped})" if grouped else exact

@approvals_app.command()
def show(request_id: str, url: UrlOption = "http://127.0.0.1:8000",
         token: TokenOption = None) -> None:
    """One request in full: the user's message, the tool, why a person is asked, the exact
    arguments and their digest, and the decision record (who, when, through what)."""
    it = _call("GET", url, f"/api/confirmations/{request_id}", token)
    context = it.get("context") or {}
    rows = [("request", it["id"]), ("status", it["status"]),
            ("agent", f"{it.get('agent_name') or it['agent_id']} ({it['agent_id']})"),
            ("requested by", it.get("requested_by") or ""),
            # A guarded call from an external agent may carry no message: no empty line.
            *[("user asked", said) for said in [context.get("user_message")] if said],
            ("tool", it["payload"]["tool_name"]),
            *[("what it does", said) for said in [context.get("tool_description")] if said],
            *[("why approval", reason) for reason in reason_texts(it.get("context"))],
            ("arguments", _arguments(it)), ("sha256", it["payload"]["args_sha256"])]
    edited = it["payload"].get("edited_args")
    if edited is not None:
        rows += [("approved as", json.dumps(edited, ensure_ascii=False, allow_nan=False)),
                 ("changed", changes_text(it.get("changes") or [])),
                 ("sha256", it["payload"]["edited_args_sha256"])]
    counted = it.get("approvals") or {}
    if counted.get("required", 1) > 1 or counted.get("count", 0) > 1:
        names = ", ".join(a["user_id"] for a in counted.get("approved_by") or [])
        rows.append(("approvals", f"{counted.get('count')} of {counted.get('required')}"
                     + (f" ({names})" if names else "")))
    if it["status"] == "pending":
        rows.append(("time left", duration_text(it["seconds_left"])))
        if it.get("can_decide"):
            rows.append(("you may", _actions(it)))
    else:
        d = it.get("decision") or {}
        rows.append(("decided", " ".join(str(x) for x in (
            it["status"], f"by {d['responded_by']}" if d.get("responded_by") else "",
            f"via {d['via']}" if d.get("via") else "", f"at {d.get('responded_at')}") if x)))
        if d.get("reason"):
            rows.append(("reason", d["reason"]))
        if d.get("message"):
            rows.append(("to the agent", d["message"]))
    for line in _followup_lines(it):
        rows.append(("follow-up", line.plain.strip()))
    for label, value in rows:
        # Text, not markup: what people and models wrote shows exactly as written.
        console.print(Text.assemble((f"{label:<13}", "bold"), str(value)), soft_wrap=True,
                      highlight=False)


def _decide(decision: str, request_id: str, url: str, token: str | None,
            reason: str | None, message: str | None = None,
            arguments: dict[str, Any] | None = None,
            remember: dict[str, Any] | None = None) -> None:
    body: dict[str, Any] = {"decision": decision, "via": "cli"}
    if reason:
        body["reason"] = reason
    if message:
        body["message"] = message
    if arguments is not None:
        body["arguments"] = arguments
    if remember:
        body["remember"] = remember
    out = _call("POST", url, f"/api/confirmations/{request_id}/respond", token, body)
    if out["status"] == "pending":  # one approval towards a quorum
        counted = out["approvals"]
        console.print(f"{request_id}: approval recorded, {counted['count']} of "
                      f"{counted['required']} approvals")
        return
    console.print(f"{request_id}: {out['status']} by {out['decision']['responded_by']} "
                  f"via {out['decision']['via']}", highlight=False)
    if out.get("changes"):
        console.print(Text(f"  changed: {changes_text(out['changes'])}"), soft_wrap=True,
                      highlight=False)
    if out.get("rule"):
        from hookgate.cli.rules_cmd import rule_line  # it imports this module

        console.print(Text.assemble("remembered: ", rule_line(out["rule"])), soft_wrap=True,
                      highlight=False)


def _edited(request_id: str, url: str, token: str | None, args: str | None,
            sets: list[str]) -> dict[str, Any] | None:
    """The arguments to approve instead: ``--args`` whole, then each ``--set`` on top (on
    the request's own arguments when there is no ``--args``); None for no edit."""
    if args is None and not sets:
        return None
    request = _call("GET", url, f"/api/confirmations/{request_id}", token)
    if request.get("can_decide") and not request.get("can_edit"):
        # The server's one answer (its can_edit): edits of this call could only be refused.
        fail(f"request {request_id}'s arguments cannot be edited (only a tool the agent "
             "declares can be approved with edits): approve or reject it as it is", 2)
    if args is not None:
        try:
            edited = json.loads(args, parse_constant=_no_constant)
        except ValueError as exc:
            fail(f"--args is not valid JSON: {exc}", 2)
        if not isinstance(edited, dict):
            fail("--args must be a JSON object", 2)
    else:
        edited = request["payload"]["args"]
    for item in sets:
        path, sep, raw = item.partition("=")
        if not sep or not path:
            fail(f"--set takes path=value, got {item!r}", 2)
        try:
            value: Any = json.loads(raw, parse_constant=_no_constant)
        except ValueError:
            value = raw  # not JSON: the text itself
        _put(edited, path.split("."), value, item)
    return dict(edited)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number an argument can hold")


def _put(target: dict[str, Any], keys: list[str], value: Any, item: str) -> None:
    for key in keys[:-1]:
        inner = target.setdefault(key, {})
        if not isinstance(inner, dict):
            fail(f"--set {item!r}: '{key}' is not an object", 2)
        target = inner
    target[keys[-1]] = value


@approvals_app.command()
def approve(request_id: str, url: UrlOption = "http://127.0.0.1:8000",
            token: TokenOption = None, reason: ReasonOption = None,
            message: MessageOption = None, args: ArgsOption = None,
            set_: SetOption = None,
            remember: Annotated[str | None, typer.Option(
                help="Also approve later calls like it: run, agent_user or org.",
                show_default=False)] = None,
            when: Annotated[str | None, typer.Option(
                help="With --remember: a constraint, e.g. 'args.amount <= 80000'.",
                show_default=False)] = None,
            expires_in: Annotated[int | None, typer.Option(
                "--expires-in", help="With --remember: seconds the rule lasts.",
                show_default=False)] = None) -> None:
    """Approve a pending request: the waiting call runs with exactly its arguments, or with
    the edited ones given by --args / --set (the agent is told what changed)."""
    rule: dict[str, Any] | None = None
    if remember is not None:
        rule = {"scope": remember, **({"when": when} if when else {}),
                **({"expires_in": expires_in} if expires_in else {})}
    elif when is not None or expires_in is not None:
        fail("--when and --expires-in go with --remember", 2)
    edited = _edited(request_id, url, token, args, set_ or [])
    _decide("approve", request_id, url, token, reason, message, edited, rule)


@approvals_app.command()
def reject(request_id: str, url: UrlOption = "http://127.0.0.1:8000",
           token: TokenOption = None, reason: ReasonOption = None,
           message: MessageOption = None) -> None:
    """Reject a pending request: the call does not run and the agent is told (with
    --message in its own words)."""
    _decide("reject", request_id, url, token, reason, message)
