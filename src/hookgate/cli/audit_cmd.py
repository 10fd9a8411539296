"""``hookgate audit list``: your org's audit rows from a running server, filtered, as a table
or JSON; ``hookgate audit verify``: re-hash the audit log and follow every chain's links,
naming each row that was edited, inserted or deleted."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

import typer
from rich.table import Table
from rich.text import Text

from hookgate.cli.app import app, console, err_console, fail
from hookgate.cli.approvals_cmd import TokenOption, UrlOption, call_api
from hookgate.cli.config_source import ConfigOption, ExampleOption
from hookgate.cli.db_cmd import DatabaseOption, database_url
from hookgate.durations import seconds_of

audit_app = typer.Typer(help="The audit log of tool calls.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")

OUTCOME_WORDS = "ok, error, blocked or withheld"


@audit_app.command("list")
def list_command(
    url: UrlOption = "http://127.0.0.1:8000",
    token: TokenOption = None,
    agent: Annotated[str | None, typer.Option(help="Only this agent's calls.",
                                              show_default=False)] = None,
    tool: Annotated[str | None, typer.Option(help="Only calls of this exact tool name.",
                                             show_default=False)] = None,
    outcome: Annotated[str | None, typer.Option(help=f"Only this outcome: {OUTCOME_WORDS}.",
                                                show_default=False)] = None,
    since: Annotated[str | None, typer.Option(
        help="Only calls from this long ago on (30m, 1h, 2d) or from this time (ISO-8601, "
             "UTC unless it names a zone).", show_default=False)] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="At most this many rows.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="The rows as the API returns them "
                                                         "(a JSON array).")] = False,
) -> None:
    """List your org's audit rows on a running server, newest first.

    One row per tool call: when, agent, tool, outcome (and what blocked it), who decided it
    (a person's user id, or the standing rule and its creator), the confirmation request it
    waited on, how long the request waited for that decision, the tool's own time, and for
    a sub-agent's call its delegation depth and the session that delegated to it.
    """
    query: dict[str, Any] = {"limit": limit}
    for key, value in (("agent_id", agent), ("tool", tool), ("outcome", outcome)):
        if value is not None:
            query[key] = value
    if since is not None:
        query["since"] = since_time(since).isoformat()
    rows = call_api("GET", url, "/api/audit?" + urlencode(query), token)["items"]
    if as_json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    if not rows:
        console.print("no audit rows match")
        return
    console.print(audit_table(rows), soft_wrap=True, highlight=False)


def since_time(value: str) -> datetime:
    """``1h`` (that long ago) or an ISO-8601 time (UTC unless it names a zone)."""
    try:
        return datetime.now(UTC) - timedelta(seconds=float(seconds_of(value)))
    except ValueError:
        pass
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        fail(f"--since takes a duration such as 30m, 1h or 2d, or an ISO-8601 time, not "
             f"{value!r}", 2)
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at


def audit_table(rows: list[dict[str, Any]]) -> Table:
    """The rows as a table; every cell is plain text (a tool name such as "[red]" shows as
    written)."""
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("time (UTC)", "agent", "tool", "outcome", "approver"):
        table.add_column(column, overflow="fold")
    # A request id is never cut or folded: it is what `hookgate approvals show` takes.
    ids = [len(row.get("request_id") or "-") for row in rows]
    table.add_column("request", no_wrap=True, min_width=max(ids, default=1))
    for column in ("wait", "tool time"):
        table.add_column(column, no_wrap=True, justify="right")
    table.add_column("delegated", overflow="fold")
    for row in rows:
        outcome = row["outcome"] + (f" by {row['blocked_by']}" if row.get("blocked_by") else "")
        table.add_row(*(Text(cell) for cell in (
            str(row["created_at"])[:19].replace("T", " "), row.get("agent_id") or "-",
            row["tool_name"], outcome, row.get("approver") or "-",
            row.get("request_id") or "-", micros_text(row.get("wait_us")),
            micros_text(row.get("latency_us")), delegation_text(row))))
    return table


def delegation_text(row: dict[str, Any]) -> str:
    """``depth 2 from s-parent``: where a sub-agent's call sits; ``-`` for a top-level one."""
    depth, parent = row.get("depth"), row.get("parent_session")
    if depth is None and parent is None:
        return "-"
    said = [] if depth is None else [f"depth {depth}"]
    if parent is not None:
        said.append(f"from {parent}")
    return " ".join(said)


def micros_text(value: int | None) -> str:
    """``1.2 ms``, ``19.4 s``, ``3m 02s``: a time in µs as people read it; ``-`` for none."""
    if value is None:
        return "-"
    if value < 1_000_000:
        return f"{value / 1000:.1f} ms"
    if value < 60_000_000:
        return f"{value / 1_000_000:.1f} s"
    minutes, seconds = divmod(round(value / 1_000_000), 60)
    return f"{minutes}m {seconds:02d}s"


@audit_app.command("verify")
def verify_command(
    config: ConfigOption = None,
    example: ExampleOption = None,
    database: DatabaseOption = None,
    org: Annotated[str | None, typer.Option(help="Check only this org's chain.",
                                            show_default=False)] = None,
) -> None:
    """Check that the audit log is exactly what the audit_log hook wrote.

    Every row is re-hashed and every chain (one per org) followed from its first row to the
    head the log keeps. Each edited, inserted or deleted row is named. Keep the printed
    head hashes elsewhere: a log rewritten from some row on, head included, can only be
    caught against a head kept outside the database.

    Exit code 0 when the log is intact, 1 when a row was tampered with or the log cannot be
    read, 2 for a usage error.
    """
    from hookgate.storage.audit import VerifyReport, verify
    from hookgate.storage.database import Database
    from hookgate.storage.failures import DATABASE_FAILURES

    url = database_url(config, example, database)

    async def check() -> VerifyReport:
        db = Database(url)
        try:
            return await verify(db, chain=org)
        finally:
            await db.dispose()

    try:
        report = asyncio.run(check())
    except DATABASE_FAILURES as exc:
        fail(f"cannot read the audit log: {type(exc).__name__}: {exc}")
    for problem in report.problems:
        err_console.print(f"chain {problem.chain!r}: {problem.kind}: {problem.message}",
                          highlight=False, soft_wrap=True, markup=False)
    for chain, (seq, digest) in sorted(report.heads.items()):
        console.print(f"chain {chain!r}: head at seq {seq}, sha256 {digest}",
                      highlight=False, soft_wrap=True, markup=False)
    if not report.ok:
        fail(f"the audit log was tampered with: {len(report.problems)} problem(s) in "
             f"{report.rows} row(s)")
    console.print(f"ok: {report.rows} row(s) in {len(report.heads)} chain(s) verified",
                  style="bold green", highlight=False)
