"""``hookgate policy``: the Cedar schema of the configured tools and agents, and a table of
test cases run against the policy sets the configuration uses."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from hookgate.cli.app import app, console, fail
from hookgate.cli.config_source import ConfigOption, ExampleOption, load_from_options
from hookgate.cli.moments import moment

if TYPE_CHECKING:
    from hookgate.agent import Agent
    from hookgate.catalog.builtin.cedar_policy import CedarPolicy
    from hookgate.config import HookgateConfig
    from hookgate.policies import PolicyDecision
    from hookgate.policies.cases import PolicyCase
    from hookgate.policies.modes import ModeCatalogue
    from hookgate.tools.tool import Tool

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
    import asyncio

    return asyncio.run(decide_case(cfg, case))


async def decide_case(cfg: HookgateConfig, case: PolicyCase) -> PolicyDecision:
    """The case's decision by the hook a server runs (`CedarPolicy.decision`), on the
    request facts the guarded path gives it (`build_metadata`); the caller's facts come
    from the configuration instead of the database."""
    return await CaseDecider(cfg).decide(case)


class CaseDecider:
    """Decides cases against one configuration's policy sets (``hookgate policy test`` and
    ``hookgate policy replay``): each agent and its ``cedar_policy`` hook built once."""

    def __init__(self, cfg: HookgateConfig) -> None:
        self.cfg = cfg
        self._agents: dict[str, Agent] = {}
        self._hooks: dict[tuple[str, str, bool], CedarPolicy] = {}

    def _agent(self, agent_id: str) -> Agent:
        found = self._agents.get(agent_id)
        if found is None:
            found = self._agents[agent_id] = self.cfg.build_agent(agent_id)
        return found

    def _hook(self, agent: Agent, user: str, admin: bool, read_only: bool) -> CedarPolicy:
        from hookgate.catalog.builtin.cedar_policy import CedarPolicy, Principal, policy_params

        key = (agent.id, user, read_only)
        found = self._hooks.get(key)
        if found is not None:
            return found
        params = policy_params(agent)
        if params is None:
            raise LookupError(f"agent '{agent.id}' has no cedar_policy hook and its org no "
                              "policies: entry")

        async def principal(user_id: str, org_id: str) -> Principal:
            return Principal(admin, read_only)

        found = self._hooks[key] = CedarPolicy.opened(params, agent, principal)
        return found

    async def decide(self, case: PolicyCase) -> PolicyDecision:
        from hookgate.catalog.builtin.cedar_policy import TOOL_SCHEMA_KEY, declared_tool
        from hookgate.hooks.model import HookContext, HookPoint
        from hookgate.tools.calls import CallIdentity, ToolCall
        from hookgate.tools.errors import ToolArgumentsError
        from hookgate.tools.guarded import build_metadata
        from hookgate.tools.guarded_call import converted_arguments

        cfg = self.cfg
        user = cfg.user(case.user)
        if user is None:
            raise LookupError(f"no user '{case.user}' in {cfg.source}")
        agent_id = case.agent or next((a.id for a in cfg.agents if case.tool in a.tools),
                                      None)
        if agent_id is None:
            raise LookupError(f"no agent has the tool '{case.tool}' (give 'agent')")
        agent = self._agent(agent_id)
        org = cfg.org(user.org)
        read_only = case.org_read_only if case.org_read_only is not None else bool(
            org and org.read_only)
        hook = self._hook(agent, user.id, user.admin, read_only)
        extras: dict[str, Any] = {}
        if case.parameters is not None:
            extras = {TOOL_SCHEMA_KEY: case.parameters}
        own = next((t for t in agent.tools if t.name == case.tool), None)
        tool = own if own is not None else declared_tool(case.tool, extras)
        if own is None and tool is not None:
            tool = _external_tool(agent, user.id, case, extras)
        path = case.execution_path or ("external" if case.parameters is not None
                                       else "react")
        identity = CallIdentity(agent_id=agent.id, user_id=user.id,
                                org_id=agent.org_id or user.org, run_id="policy-test",
                                execution_path=path,  # type: ignore[arg-type]
                                require_confirmation_for_all=agent.require_confirmation_for_all)
        try:
            needs = identity.require_confirmation_for_all or bool(
                tool and tool.needs_confirmation(converted_arguments(tool, case.args)))
        except ToolArgumentsError:
            needs = True  # the hook denies these arguments, saying why
        metadata = {**extras, **build_metadata(identity, ToolCall("case", case.tool,
                                                                  case.args), tool, needs)}
        ctx = HookContext(hook_point=HookPoint.PRE_TOOL_USE, tool_name=case.tool,
                          tool_args=dict(case.args), agent_id=agent.id, user_id=user.id,
                          metadata=metadata)
        when = datetime.fromisoformat(case.now) if case.now else datetime.now(UTC)
        return await hook.decision(ctx, now=when)


def _external_tool(agent: Agent, user_id: str, case: PolicyCase, extras: dict[str, Any]
                   ) -> Tool:
    """A declared tool as the guarded-call API makes it (external/calls.py): it writes and
    its connector is the framework (``api``) unless the agent's ``guarded_calls.rules`` say
    otherwise, and those rules may ask for a person."""
    from hookgate.external.calls import SECTION
    from hookgate.external.policy import CallRules, probe_context

    rules = CallRules.read(agent, SECTION, default_wait_s=0.0)
    probe = probe_context(case.tool, dict(case.args), agent, user_id,
                          {**extras, "framework": "api"})
    return rules.tool(case.tool, probe, writes=True, connector="api", schema=case.parameters)


@policy_app.command("reload")
def reload_command(config: ConfigOption = None, example: ExampleOption = None) -> None:
    """Declare the policy files and the configuration's modes complete: validate every set
    the configuration uses and stamp its version beside it (``PATH.version``), and validate
    the configuration and stamp the ``mode:`` of its entries (``CONFIG.modes``). Every
    running server takes a stamped set, and stamped modes, within about a second; files
    changed and not stamped (a write under way) never load. A change beyond a mode is named:
    it needs a restart, and a server keeps all its modes until then."""
    from hookgate.config.policies import policy_sets_in_use, policy_sets_left_unloaded
    from hookgate.policies import PolicyLoadError
    from hookgate.policies.reload import checked_version
    from hookgate.policies.stamp import write_stamp

    with policy_sets_left_unloaded():
        cfg = load_from_options(config, example, code=2)
    problems, sets = policy_sets_in_use(cfg)
    if problems:
        fail("; ".join(f"{key}: {why}" for key, why in problems), 2)
    modes = _checked_modes(cfg)
    checked = []
    for use in sets:
        try:
            checked.append((use, checked_version(Path(use.path), use.default,  # type: ignore[arg-type]
                                                 use.tools,
                                                 declared_tools=use.declared_tools)))
        except PolicyLoadError as exc:
            fail(f"{use.key}: {use.path}: nothing stamped: " + " | ".join(exc.problems), 1)
    for use, version in checked:  # stamped only once every set validates
        try:
            write_stamp(Path(use.path), version)
        except PolicyLoadError as exc:
            fail(str(exc), 1)
        console.print(f"{use.path}: {version} stamped", highlight=False)
    _check_agents(cfg)  # once the sets are stamped: their hooks load them
    _stamp_modes(Path(cfg.source), modes)


def _checked_modes(cfg: HookgateConfig) -> ModeCatalogue:
    """The modes of ``cfg``'s entries; exits 1 naming a bad one."""
    from hookgate.config.modes import mode_catalogue
    from hookgate.hooks.errors import HookBuildError

    try:
        return mode_catalogue(cfg)
    except HookBuildError as exc:
        fail(f"{cfg.source}: nothing stamped: {exc}", 1)


def _check_agents(cfg: HookgateConfig) -> None:
    """Exit 1, stamping no modes, when an agent does not build (`hookgate check`)."""
    from hookgate.config.agent_check import check_agents
    from hookgate.hooks.services import HookServices
    from hookgate.storage.database import Database

    broken = check_agents(cfg, HookServices(database=Database(cfg.database))).broken
    if broken:
        fail(f"{cfg.source}: no modes stamped: " + " | ".join(str(a) for a in broken), 1)


def _stamp_modes(source: Path, modes: ModeCatalogue) -> None:
    """Stamp the entries' modes beside the file; name what changed beyond a mode since the
    last stamp (a running server keeps its modes until it is restarted with that file)."""
    from hookgate.policies import PolicyLoadError
    from hookgate.policies.modes import read_modes_stamp, write_modes_stamp

    try:
        before = read_modes_stamp(source)
    except PolicyLoadError:
        before = None
    try:
        write_modes_stamp(source, modes)
    except PolicyLoadError as exc:
        fail(str(exc), 1)
    console.print(f"{source}: modes {modes.version} stamped ({len(modes.entries)} entries)",
                  highlight=False, soft_wrap=True)
    changed = [] if before is None else modes.beyond_modes(before)
    if changed:
        console.print(f"{source}: changed beyond their mode since the last reload: "
                      f"{', '.join(changed)}; these need a restart (until then a running "
                      "server keeps the modes it has)", highlight=False, soft_wrap=True)


@policy_app.command("status")
def status_command(config: ConfigOption = None, example: ExampleOption = None) -> None:
    """Which policy set is in force for each path the configuration uses (its version),
    and why the files are not, if they are not: what a server serving these files takes.
    A running server's own view is ``GET /api/policies/status``. Exits 1 when a set's
    files do not load or are not the stamped set."""
    from hookgate.config.policies import policy_sets_in_use, policy_sets_left_unloaded
    from hookgate.policies import PolicyLoadError
    from hookgate.policies.live import LivePolicySet
    from hookgate.policies.reload import checked_version
    from hookgate.policies.source import read_policy_files, version_of
    from hookgate.policies.stamp import read_stamp

    with policy_sets_left_unloaded():
        cfg = load_from_options(config, example, code=2)
    _, sets = policy_sets_in_use(cfg)
    if not sets:
        fail(f"{cfg.source} uses no policy sets", 2)
    table = Table(title="policy sets", title_justify="left")
    for column in ("path", "in force", "state", "files", "stamped", "error"):
        table.add_column(column, overflow="fold")
    bad = 0
    for use in sets:
        path = Path(use.path)
        stamped = read_stamp(path)
        try:
            live = LivePolicySet(path, use.default, use.tools,  # type: ignore[arg-type]
                                 declared_tools=use.declared_tools)
            shown = live.status()
            bad += shown.state != "in force"
            note = shown.error or ("no stamp: a server runs the files it started with; "
                                   "`hookgate policy reload` stamps them" if stamped is None
                                   else "-")
            row = [shown.version, shown.state, shown.files_version or "-",
                   shown.stamped_version or "-", note]
        except PolicyLoadError as exc:
            bad += 1
            problems = list(exc.problems)
            try:
                files = version_of(read_policy_files(path))
            except PolicyLoadError:
                files = "-"
            try:
                checked_version(path, use.default, use.tools,  # type: ignore[arg-type]
                                declared_tools=use.declared_tools)
            except PolicyLoadError as invalid:
                problems += [p for p in invalid.problems if p not in problems]
            state = "not reloaded" if stamped is not None and files != stamped \
                else "reload failed"
            # What a running server has live is its own last good set; this process has none.
            row = ["each server's last good set", state, files, stamped or "-",
                   " | ".join(problems)]
        table.add_row(use.path, *row)
    console.print(table)
    if bad:
        raise typer.Exit(1)


SinceOption = Annotated[str, typer.Option(
    "--since", help="Replay calls from this long ago on (30m, 1h, 2d) or from this time "
                    "(ISO-8601, UTC unless it names a zone).")]
UntilOption = Annotated[str | None, typer.Option(
    "--until", help="Up to (not including) this time or this long ago; default: now.",
    show_default=False)]


async def replay_candidate(cfg: HookgateConfig, database: str, since: datetime,
                           until: datetime | None, *, ci: bool = False) -> Any:
    """The replay report of ``cfg``'s policy sets over the audited calls of the period in
    ``database``: each call decided by `CaseDecider` (what `hookgate policy test` and a
    server ask), compared with what was decided then (hookgate.policies.replay)."""
    from hookgate.policies.cases import PolicyCase
    from hookgate.policies.replay import (
        COLUMNS,
        CandidateDecision,
        RecordedCall,
        recorded_call,
        replay,
    )
    from hookgate.storage.audit import rows_between
    from hookgate.storage.database import Database

    decider = CaseDecider(cfg)
    agents = {a.id for a in cfg.agents}

    async def decide(call: RecordedCall) -> CandidateDecision:
        if call.agent_id not in agents:
            raise LookupError("agent not in the candidate configuration")
        if cfg.user(str(call.user_id)) is None:
            raise LookupError("user not in the candidate configuration")
        case = PolicyCase(name=f"audit {call.id}", user=str(call.user_id), tool=call.tool,
                          expect="allow", args=dict(call.args or {}), agent=call.agent_id,
                          now=call.at.isoformat(), execution_path=call.execution_path)
        try:
            decision = await decider.decide(case)
        except LookupError as exc:  # an agent without policies: nothing to compare
            raise LookupError("agent has no policy set in the candidate") from exc
        return CandidateDecision(decision.effect, ", ".join(decision.policy_ids)
                                 or "(default)", decision.explanation())

    db = Database(database)
    try:
        rows = await rows_between(db, COLUMNS, since, until)
    finally:
        await db.dispose()
    return await replay((recorded_call(r) for r in rows), decide, ci=ci)


@policy_app.command("replay")
def replay_command(
    since: SinceOption, until: UntilOption = None,
    config: ConfigOption = None, example: ExampleOption = None,
    database: Annotated[str | None, typer.Option(
        "--database", help="Database URL whose audit log holds the calls (default: the "
                           "candidate configuration's).", show_default=False)] = None,
    ci: Annotated[bool, typer.Option(
        "--ci", help="Nobody to ask: every 'ask' (then and now) counts as a deny, and the "
                     "command exits 1 when any decision changes.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="The report as JSON.")] = False,
) -> None:
    """Replay the audited calls of a period through the candidate configuration's policy
    sets and report, per deciding rule, which past decisions would change (allow to deny,
    allow to ask, and so on) with examples. Calls whose arguments were stored masked, or whose agent
    or user the candidate does not know, are counted as not replayable.

    Exit codes: 0 replayed (with --ci: and nothing changed); 1 with --ci, some decision
    changed; 2 bad input (configuration, database, period)."""
    cfg = load_from_options(config, example, code=2)
    start, end = moment("--since", since), None if until is None else moment("--until",
                                                                                  until)
    if end is not None and end <= start:
        fail(f"--until ({end.isoformat()}) must be after --since ({start.isoformat()})", 2)
    import asyncio

    from hookgate.storage.database import DatabaseError

    try:
        report = asyncio.run(replay_candidate(cfg, database or cfg.database, start, end,
                                              ci=ci))
    except DatabaseError as exc:
        fail(f"the audit log cannot be read: {exc}", 2)
    if as_json:
        print(json.dumps({"since": start.isoformat(),
                          "until": None if end is None else end.isoformat(),
                          **report.as_dict()}, indent=2, default=str))
    else:
        _print_report(report, start, end)
    if ci and report.changed:
        raise typer.Exit(1)


def _print_report(report: Any, start: datetime, end: datetime | None) -> None:
    period = f"{start.isoformat()} to {end.isoformat() if end else 'now'}"
    console.print(f"{report.calls} calls from {period}: {report.replayed} replayed, "
                  f"{report.changed} would change, {report.unchanged} unchanged, "
                  f"{sum(report.not_replayable.values())} not replayable"
                  + (" (--ci: every ask counts as a deny)" if report.ci else ""),
                  highlight=False)
    for why, count in sorted(report.not_replayable.items()):
        console.print(f"  not replayable: {count} ({why})", highlight=False)
    if not report.changes:
        return
    table = Table(title="decisions that would change", title_justify="left")
    for column in ("rule", "change", "calls", "examples (audit id: tool args)"):
        table.add_column(column, overflow="fold")
    for change in report.sorted_changes():
        shown = "\n".join(f"{e['audit_id']}: {e['tool']} {json.dumps(e['args'])}"
                          for e in change.examples)
        table.add_row(change.rule, f"{change.before} → {change.after}", str(change.count),
                      shown)
    console.print(table)
