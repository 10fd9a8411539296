"""``hookgate audit verify``: re-hash the audit log and follow every chain's links, naming
each row that was edited, inserted or deleted."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from hookgate.cli.app import app, console, err_console, fail
from hookgate.cli.config_source import ConfigOption, ExampleOption
from hookgate.cli.db_cmd import DatabaseOption, database_url

audit_app = typer.Typer(help="The audit log of tool calls.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")


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
    from sqlalchemy.exc import SQLAlchemyError

    from hookgate.storage.audit import VerifyReport, verify
    from hookgate.storage.database import Database

    url = database_url(config, example, database)

    async def check() -> VerifyReport:
        db = Database(url)
        try:
            return await verify(db, chain=org)
        finally:
            await db.dispose()

    try:
        report = asyncio.run(check())
    except SQLAlchemyError as exc:
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
