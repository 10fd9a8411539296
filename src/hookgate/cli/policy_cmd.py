"""``hookgate policy``: the Cedar schema of the configured tools and agents, and a table of
test cases run against the policy sets the configuration uses."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from hookgate.cli.app import app, console, fail
from hookgate.cli.config_source import ConfigOption, ExampleOption, load_from_options

if TYPE_CHECKING:
    from hookgate.config import HookgateConfig
    from hookgate.policies import PolicyDecision
    from hookgate.policies.cases import PolicyCase

policy_app = typer.Typer(help="Policy as code in Cedar: schema and tests.", no_args_is_help=True)
app.add_typer(policy_app, name="policy")


@policy_app.command("schema")
def schema_command(config: ConfigOption = None, example: ExampleOption = None) -> None:
    """Print the Cedar schema of the configured tools (arguments typed from signatures),
    users, orgs and agents: what policies are validated against."""
    from hookgate.policies import cedar_schema_text

    cfg = load_from_options(config, example, code=2)
    print(cedar_schema_text(cfg.tool_objects.values()), end="")


@policy_app.command("test")
def test_command(
    cases_file: Annotated[Path, typer.Argument(help="YAML: {cases: [{user, tool, args, "
                                                    "expect: allow|deny|ask}]}",
                                               exists=True, dir_okay=False)],
    config: ConfigOption = None, example: ExampleOption = None,
) -> None:
    """Run each case against its agent's policy set; print which policies decided it.
    Exits 1 when any case gets another decision than expected."""
    from hookgate.policies import PolicyLoadError
    from hookgate.policies.cases import read_cases

    cfg = load_from_options(config, example, code=2)
    try:
        cases = read_cases(cases_file)
    except PolicyLoadError as exc:
        fail(str(exc), 2)
    table = Table(title=f"policy cases: {cases_file}", title_justify="left")
    for column in ("case", "expected", "got", "deciding policies", "why"):
        table.add_column(column)
    failed, versions = 0, set()
    for case in cases:
        try:
            decision = _decide(cfg, case)
        except (LookupError, PolicyLoadError, ValueError) as exc:
            fail(f"{cases_file}: case '{case.name}': {exc}", 2)
        ok = decision.effect == case.expect
        failed += not ok
        versions.add(decision.version)
        table.add_row(case.name, case.expect,
                      f"[green]{decision.effect}[/]" if ok else f"[red]{decision.effect}[/]",
                      ", ".join(decision.policy_ids) or "-",
                      "; ".join(decision.reasons + decision.errors) or "-")
    table.caption = f"policy set {', '.join(sorted(versions))}"
    console.print(table)
    console.print(f"{len(cases) - failed} passed, {failed} failed", highlight=False)
    if failed:
        raise typer.Exit(1)


def _decide(cfg: HookgateConfig, case: PolicyCase) -> PolicyDecision:
    from hookgate.catalog.builtin.cedar_policy import audits_every_call
    from hookgate.policies import CallFacts, open_policy_set

    user = cfg.user(case.user)
    if user is None:
        raise LookupError(f"no user '{case.user}' in {cfg.source}")
    agent_id = case.agent or next((a.id for a in cfg.agents if case.tool in a.tools), None)
    if agent_id is None:
        raise LookupError(f"no agent has the tool '{case.tool}' (give 'agent')")
    agent = cfg.build_agent(agent_id)
    params = _policy_params(agent.model_config_json)
    if params is None:
        raise LookupError(f"agent '{agent_id}' has no cedar_policy hook and its org no "
                          "policies: entry")
    live = open_policy_set(Path(params["policies"]), params["default"], agent.tools)
    tool = cfg.tool_objects.get(case.tool)
    org = cfg.org(user.org)
    read_only = case.org_read_only if case.org_read_only is not None else bool(
        org and org.read_only)
    when = datetime.fromisoformat(case.now) if case.now else datetime.now(UTC)
    facts = CallFacts(
        tool_name=case.tool, args=case.args, user_id=user.id, org_id=user.org,
        agent_id=agent.id, admin=user.admin, org_read_only=read_only,
        agent_org_id=agent.org_id, agent_owner=agent.owner_user_id,
        agent_audited=audits_every_call(agent),
        connector=tool.connector if tool else None, writes=bool(tool and tool.writes),
        requires_confirmation=bool(tool and tool.needs_confirmation(case.args)),
        now=when)
    return live.decide(facts)


def _policy_params(model_config_json: dict[str, Any]) -> dict[str, Any] | None:
    hooks = model_config_json.get("hooks") or {}
    for entry in hooks.get("class_hooks") or ():
        if isinstance(entry, dict) and entry.get("name") == "cedar_policy":
            params: dict[str, Any] = entry.get("params") or {}
            return params
    return None
