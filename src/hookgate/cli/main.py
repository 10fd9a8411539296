"""The ``hookgate`` command. Each command group is a module that registers onto ``app``;
adding one is one import line here.
"""

from __future__ import annotations

from hookgate.cli import (  # noqa: F401  (they register commands)
    approvals_cmd,
    audit_cmd,
    check_cmd,
    claude_code_cmd,
    codex_cmd,
    copilot_cmd,
    cursor_cmd,
    db_cmd,
    demo_cmd,
    eval_cmd,
    gemini_cmd,
    help_style,
    hooks_cmd,
    login_cmd,
    mcp_cmd,
    orgs_cmd,
    policy_cmd,
    rules_cmd,
    run_cmd,
    secrets_cmd,
    serve_cmd,
    users_cmd,
    workflow_cmd,
)
from hookgate.cli.app import app

help_style.apply(app)

__all__ = ["app"]

if __name__ == "__main__":
    app(prog_name="hookgate")
