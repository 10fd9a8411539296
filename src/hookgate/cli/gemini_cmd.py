"""``hookgate gemini install | uninstall``: write (or remove) the Gemini CLI hooks that make
hookgate its approval backend, keeping every other setting, and ``--check`` that Gemini
would run them and that they reach hookgate."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from hookgate.cli.app import app, console, fail
from hookgate.cli.config_source import ConfigOption, ExampleOption
from hookgate.cli.hook_install_options import (
    AgentOption,
    ServerUrlOption,
    TokenEnvOption,
    WaitOption,
    probe_session_start,
    remove_hooks,
    server_and_wait,
    write_hooks,
)

gemini_app = typer.Typer(help="Gemini CLI: hookgate as its remote approval backend.",
                         no_args_is_help=True)
app.add_typer(gemini_app, name="gemini")

ProjectOption = Annotated[Path | None, typer.Option(
    "--project", file_okay=False, help="Write PROJECT/.gemini/settings.json (the default: "
                                       "the current folder).")]
UserOption = Annotated[bool, typer.Option(
    "--user", help="Write ~/.gemini/settings.json ($GEMINI_CLI_HOME/.gemini; every "
                   "project) instead.")]


def _user_settings() -> Path:
    home = os.environ.get("GEMINI_CLI_HOME") or str(Path.home())
    return Path(home) / ".gemini" / "settings.json"


def _target(project: Path | None, user: bool) -> tuple[Path, Path]:
    """The settings.json to write and the folder Gemini runs in."""
    folder = (project or Path.cwd()).resolve()
    if user:
        return _user_settings(), folder
    return folder / ".gemini" / "settings.json", folder


@gemini_app.command("install")
def install_command(
    agent: AgentOption,
    config: ConfigOption = None,
    example: ExampleOption = None,
    url: ServerUrlOption = None,
    token_env: TokenEnvOption = "HOOKGATE_TOKEN",
    project: ProjectOption = None,
    user: UserOption = False,
    wait_s: WaitOption = None,
    check: Annotated[bool, typer.Option(
        "--check", help="Only check that Gemini would run the installed hooks and that "
                        "they reach hookgate.")] = False,
) -> None:
    """Write Gemini CLI's settings.json so Gemini asks hookgate about every tool call.

    Each hook is one curl command posting to /api/gemini/hooks?agent=ID with 'Authorization:
    Bearer $TOKEN_ENV'; anything short of hookgate's answer blocks the call (exit 2). Other
    settings and hooks in the file are kept; earlier hookgate hooks are replaced.
    """
    from hookgate.coding_agents.gemini_config import hooks_block, merge_into

    target, folder = _target(project, user)
    if check:
        _check(target, folder, token_env)
        return
    server, wait = server_and_wait(agent, config, example, url, wait_s, token_env)
    block = hooks_block(server, agent, token_env=token_env, wait_s=wait)
    write_hooks(target, block, merge_into)
    console.print(f"wrote {target}: SessionStart, BeforeAgent, BeforeTool and AfterTool "
                  f"hooks of agent '{agent}'; set {token_env} to your hookgate token",
                  highlight=False,
                  soft_wrap=True)
    if not user:
        console.print("Gemini runs a project's hooks only in a trusted folder (headless "
                      "runs: GEMINI_CLI_TRUST_WORKSPACE=true or --skip-trust)",
                      highlight=False, soft_wrap=True)


@gemini_app.command("uninstall")
def uninstall_command(project: ProjectOption = None, user: UserOption = False) -> None:
    """Remove hookgate's hooks from Gemini's settings.json; everything else is kept."""
    from hookgate.coding_agents.gemini_config import remove_from

    remove_hooks(_target(project, user)[0], remove_from)


def _check(target: Path, folder: Path, token_env: str) -> None:
    """hookgate's three hooks are in ``target``, no settings file switches them off, and the
    SessionStart one, run as Gemini runs it, gets hookgate's answer."""
    from hookgate.coding_agents.gemini_config import ours, why_not_run

    try:
        settings = json.loads(target.read_text(encoding="utf-8")) if target.exists() else {}
        found = ours(settings) if isinstance(settings, dict) else {}
        off = why_not_run([_user_settings(), folder / ".gemini" / "settings.json"])
    except (ValueError, OSError) as exc:
        fail(f"check failed: cannot read Gemini's settings: {exc}")
    missing = [e for e in ("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool")
               if e not in found]
    if missing:
        fail(f"check failed: {target} has no hookgate hook for {', '.join(missing)} (run "
             "hookgate gemini install)")
    if off is not None:
        fail(f"check failed: Gemini would not run hookgate's hooks: {off}")
    probe_session_start(found["SessionStart"], folder, token_env,
                        {"source": "check", "timestamp": "check"})
    console.print(f"ok: Gemini runs hookgate's SessionStart, BeforeAgent, BeforeTool and "
                  "AfterTool hooks "
                  f"from {target}, and hookgate answered the SessionStart one",
                  highlight=False, soft_wrap=True)
