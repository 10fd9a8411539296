"""The ``hookgate`` command. Each command group is a module that registers onto ``app``;
adding one is one line in ``COMMAND_MODULES`` here.

A command line that names a command registers only that command's module (``hookgate
serve`` builds no other command's options); anything else (``--help``, no command, a name
not listed) registers them all, so the help and the "no such command" answer list every one.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer

#: Each top-level command, by the module that registers it (tests/cli/test_cli_lazy.py
#: checks the list against what the modules register).
COMMAND_MODULES: dict[str, str] = {
    "approvals": "approvals_cmd", "audit": "audit_cmd", "check": "check_cmd",
    "claude-code": "claude_code_cmd", "codex": "codex_cmd", "copilot": "copilot_cmd",
    "cursor": "cursor_cmd", "db": "db_cmd", "demo": "demo_cmd", "eval": "eval_cmd",
    "gemini": "gemini_cmd", "hooks": "hooks_cmd", "login": "login_cmd",
    "logout": "login_cmd", "mcp": "mcp_cmd", "orgs": "orgs_cmd", "policy": "policy_cmd",
    "rules": "rules_cmd", "run": "run_cmd", "secrets": "secrets_cmd", "serve": "serve_cmd",
    "worker": "serve_cmd", "users": "users_cmd", "workflow": "workflow_cmd",
}


def registered(commands: Sequence[str] | None = None) -> typer.Typer:
    """``app`` with the modules of ``commands`` registered (every module when None), its
    help styled (help_style, applied again after each registration: it is idempotent)."""
    from hookgate.cli import help_style
    from hookgate.cli.app import app

    modules = dict.fromkeys(COMMAND_MODULES.values() if commands is None
                            else (COMMAND_MODULES[c] for c in commands))
    for module in modules:
        importlib.import_module(f"hookgate.cli.{module}")
    help_style.apply(app)
    return app


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``hookgate`` on ``argv`` (the process's arguments by default)."""
    from hookgate.cli.start_collector import paused_until_started

    args = list(sys.argv[1:] if argv is None else argv)
    named = args[0] if args and args[0] in COMMAND_MODULES else None
    with paused_until_started():
        app = registered(None if named is None else [named])
    app(args=args, prog_name="hookgate")


def __getattr__(name: str) -> typer.Typer:
    # ``from hookgate.cli.main import app``: the application with every command.
    if name == "app":
        return registered()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    main()
