"""``hookgate audit list``: your org's audit rows from a running server, filtered, as a table
or JSON; ``hookgate audit verify``: re-hash the audit log and follow every chain's links,
naming each row that was edited, inserted or deleted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import urlencode

import typer
from rich.table import Table
from rich.text import Text

from hookgate.cli.app import app, console, err_console, fail
from hookgate.cli.approvals_cmd import TokenOption, UrlOption, call_api
from hookgate.cli.config_source import ConfigOption, ExampleOption
from hookgate.cli.db_cmd import DatabaseOption, database_url
from hookgate.cli.moments import moment

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
    session: Annotated[str | None, typer.Option(
        help="Only calls of this session, as the agent named it (an external agent's "
             "session id, a run's conversation id).", show_default=False)] = None,
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

    One row per tool call: when, tool, outcome (and what blocked it), who decided it and
    what (a person's user id, or the standing rule and its creator; approved, rejected,
    expired), the confirmation request it waited on, then as the terminal's width allows:
    the agent, how long the request waited for that decision, the session, the tool's own
    time, and for a sub-agent's call its delegation depth and the session that delegated
    to it. A column that does not fit is left out and named below the table (--json has
    every field).
    """
    query: dict[str, Any] = {"limit": limit}
    for key, value in (("agent_id", agent), ("tool", tool), ("outcome", outcome),
                       ("session", session)):
        if value is not None:
            query[key] = value
    if since is not None:
        query["since"] = moment("--since", since).isoformat()
    rows = call_api("GET", url, "/api/audit?" + urlencode(query), token)["items"]
    if as_json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    if not rows:
        console.print("no audit rows match")
        return
    table, left_out = fitting_table(rows, console.width)
    console.print(table, highlight=False)
    if left_out:
        console.print(Text(f"(left out at this width: {', '.join(left_out)}; widen the "
                           "terminal or use --json)", style="dim"), highlight=False)


#: The columns every table has, and those added in this order as the width allows.
_ALWAYS = ("time (UTC)", "tool", "outcome", "decided by", "request")
_OPTIONAL = ("agent", "wait", "session", "tool time", "delegated")
_ORDER = ("time (UTC)", "agent", "tool", "outcome", "decided by", "request", "wait",
          "session", "tool time", "delegated")


#: How narrow a column of text may get before columns are left out instead.
_READABLE = {"time (UTC)": 10, "tool": 14, "outcome": 13, "decided by": 10, "agent": 10,
             "session": 12, "delegated": 10}
#: Columns whose text never folds (a request id is what `hookgate approvals show` takes).
_WHOLE = ("request", "wait", "tool time")
_GAP = 2


def fitting_table(rows: list[dict[str, Any]], width: int) -> tuple[Table, list[str]]:
    """The table of ``rows`` in ``width`` terminal columns, and the columns left out to make
    it fit: every column at its natural width when they all fit, else text folds inside
    its cells (never below a readable width; a request id never) and the optional columns
    are left out, last first, until the rest fits."""
    natural = {c: max([len(c), *(len(_CELLS[c](row)) for row in rows)]) for c in _ORDER}
    if sum(natural.values()) + _GAP * (len(_ORDER) - 1) <= width:
        return audit_table(rows), []
    widths = {c: natural[c] if c in _WHOLE else min(natural[c], _READABLE[c]) for c in _ORDER}
    shown = list(_OPTIONAL)
    while shown:
        columns = [c for c in _ORDER if c in _ALWAYS or c in shown]
        if sum(widths[c] for c in columns) + _GAP * (len(columns) - 1) <= width:
            break
        shown.pop()
    columns = [c for c in _ORDER if c in _ALWAYS or c in shown]
    # What is left goes to the text columns that then fold least, the nearest whole first.
    spare = width - sum(widths[c] for c in columns) - _GAP * (len(columns) - 1)
    for c in sorted(columns, key=lambda c: natural[c] - widths[c]):
        grow = min(spare, natural[c] - widths[c])
        widths[c] += grow
        spare -= grow
    return (audit_table(rows, tuple(columns), {c: widths[c] for c in columns}),
            [c for c in _OPTIONAL if c not in shown])


def decided_text(row: dict[str, Any]) -> str:
    """``alice (rejected)``: who decided the call and what; ``-`` when no one was asked."""
    who = row.get("decided_by") or row.get("approver")
    if not who:
        return "-"
    return f"{who} ({row['decision']})" if row.get("decision") else str(who)


_CELLS: dict[str, Callable[[dict[str, Any]], str]] = {
    "time (UTC)": lambda r: str(r["created_at"])[:19].replace("T", " "),
    "agent": lambda r: r.get("agent_id") or "-",
    "tool": lambda r: str(r["tool_name"]),
    "outcome": lambda r: r["outcome"] + (f" by {r['blocked_by']}" if r.get("blocked_by")
                                         else ""),
    "decided by": decided_text,
    "request": lambda r: r.get("request_id") or "-",
    "wait": lambda r: micros_text(r.get("wait_us")),
    "session": lambda r: r.get("session_id") or "-",
    "tool time": lambda r: micros_text(r.get("latency_us")),
    "delegated": lambda r: delegation_text(r),
}


def audit_table(rows: list[dict[str, Any]], columns: tuple[str, ...] = _ORDER,
                widths: dict[str, int] | None = None) -> Table:
    """The rows as a table of ``columns`` (``widths``: fixed widths, text folding within
    them); every cell is plain text (a tool name such as "[red]" shows as written)."""
    table = Table(box=None, pad_edge=False, show_edge=False)
    chosen = [c for c in _ORDER if c in columns]
    for column in chosen:
        fixed = (widths or {}).get(column)
        if column in _WHOLE:
            table.add_column(column, no_wrap=True, width=fixed,
                             justify="left" if column == "request" else "right")
        else:
            table.add_column(column, overflow="fold", width=fixed)
    for row in rows:
        table.add_row(*(Text(_CELLS[c](row)) for c in chosen))
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
