"""``hookgate rules list | create | mode | revoke | enable``: standing rules ("approve and
remember") on a running server: which calls are approved without asking, by whose decision,
until when; a rule in shadow mode only records that it would have approved a call."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from hookgate.cli.app import app, console
from hookgate.cli.approvals_cmd import TokenOption, UrlOption, call_api
from hookgate.durations import count_text

rules_app = typer.Typer(help="Standing rules: calls approved without asking.",
                        no_args_is_help=True)
app.add_typer(rules_app, name="rules")

ExpiresOption = Annotated[int | None, typer.Option(
    "--expires-in", help="Seconds until the rule stops matching (default: until revoked).",
    show_default=False)]
WhenOption = Annotated[str | None, typer.Option(
    help="A constraint on the arguments, e.g. 'args.amount <= 80000'.", show_default=False)]


def rule_line(rule: dict[str, Any]) -> Text:
    """One rule on one line: id, state, what it covers, who made it, its uses."""
    state = "active" if rule["active"] else (
        "revoked" if rule.get("revoked_at") else
        "suspended" if rule.get("suspended_at") else "expired")
    covers = {"run": f"run {rule.get('run_id')}", "agent_user": f"user {rule.get('user_id')}",
              "org": "everyone in the org"}.get(rule["scope"], rule["scope"])
    until = f", until {rule['expires_at']}" if rule.get("expires_at") else ""
    when = f" when {rule['when']}" if rule.get("when") else ""
    if rule.get("mode", "enforce") != "enforce":
        state += f" ({rule.get('mode')} mode: records, never approves)"
    return Text.assemble(
        (rule["id"], "bold"), f"  {state}  ", (rule["tool_name"], "bold"),
        f"{when}  agent {rule['agent_id']}, {covers}; created by {rule['created_by']}"
        f"{until}; used {count_text(rule['uses'], 'time')}")


@rules_app.command("list")
def list_(url: UrlOption = "http://127.0.0.1:8000", token: TokenOption = None,
          all_: Annotated[bool, typer.Option("--all", help="Also revoked and expired ones.")
                          ] = False) -> None:
    """List your org's standing rules (active ones unless --all)."""
    rules = call_api("GET", url, "/api/approval-rules" + ("" if all_ else "?active=true"),
                     token)
    if not rules:
        console.print("no standing rules")
    for rule in rules:
        # Text, not markup: a constraint such as "[red]" shows as written.
        console.print(rule_line(rule), soft_wrap=True, highlight=False)


@rules_app.command()
def create(
    agent: Annotated[str, typer.Option(help="The agent whose calls it covers.")],
    tool: Annotated[str, typer.Option(help="The exact tool name.")],
    scope: Annotated[str, typer.Option(help="run, agent_user or org.")],
    url: UrlOption = "http://127.0.0.1:8000",
    token: TokenOption = None,
    run: Annotated[str | None, typer.Option(help="The run (scope run).",
                                            show_default=False)] = None,
    user: Annotated[str | None, typer.Option(help="Whose calls (scope agent_user).",
                                             show_default=False)] = None,
    when: WhenOption = None,
    expires_in: ExpiresOption = None,
    mode: Annotated[str | None, typer.Option(
        help="shadow: only record that it would approve a call (a person is still asked); "
             "enforce (the default): approve.", show_default=False)] = None,
) -> None:
    """Create a standing rule: calls it covers are approved as if you approved them."""
    body: dict[str, Any] = {"agent_id": agent, "tool_name": tool, "scope": scope}
    for key, value in (("run_id", run), ("user_id", user), ("when", when),
                       ("expires_in", expires_in), ("mode", mode)):
        if value is not None:
            body[key] = value
    rule = call_api("POST", url, "/api/approval-rules", token, body)
    console.print(rule_line(rule), soft_wrap=True, highlight=False)


@rules_app.command("mode")
def mode_(rule_id: str,
          mode: Annotated[str, typer.Argument(help="shadow or enforce.")],
          url: UrlOption = "http://127.0.0.1:8000", token: TokenOption = None) -> None:
    """Switch a rule between shadow (records that it would approve, a person is asked) and
    enforce (approves): its creator or an admin; the next call reads it, no restart."""
    rule = call_api("PATCH", url, f"/api/approval-rules/{rule_id}", token, {"mode": mode})
    console.print(rule_line(rule), soft_wrap=True, highlight=False)


@rules_app.command()
def revoke(rule_id: str, url: UrlOption = "http://127.0.0.1:8000",
           token: TokenOption = None) -> None:
    """Revoke a standing rule: from now on it approves nothing."""
    rule = call_api("DELETE", url, f"/api/approval-rules/{rule_id}", token)
    console.print(f"{rule['id']}: revoked by {rule['revoked_by']}")


@rules_app.command()
def enable(rule_id: str, url: UrlOption = "http://127.0.0.1:8000",
           token: TokenOption = None) -> None:
    """Enable a suspended rule again (admins): one suspended when its creator's token was
    revoked. Its creator is still checked at every use."""
    rule = call_api("POST", url, f"/api/approval-rules/{rule_id}/enable", token)
    console.print(rule_line(rule), soft_wrap=True, highlight=False)
