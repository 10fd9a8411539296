"""``hookgate codex install | uninstall``: write (or remove) the Codex hooks that make
hookgate its approval backend, trust them so Codex does not skip them silently, and
``--check`` that they load and reach hookgate."""

from __future__ import annotations

import os
import shutil
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

codex_app = typer.Typer(help="Codex: hookgate as its remote approval backend.",
                        no_args_is_help=True)
app.add_typer(codex_app, name="codex")

ProjectOption = Annotated[Path | None, typer.Option(
    "--project", file_okay=False, help="Write PROJECT/.codex/hooks.json (the default: the "
                                       "current folder).")]
UserOption = Annotated[bool, typer.Option(
    "--user", help="Write $CODEX_HOME/hooks.json (every project) instead.")]
CodexOption = Annotated[str, typer.Option(
    "--codex", help="The Codex CLI that trusts the hooks (codex app-server).")]


def _target(project: Path | None, user: bool) -> tuple[Path, Path]:
    """The hooks.json to write and the folder Codex runs in."""
    if user:
        home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
        return home / "hooks.json", (project or Path.cwd()).resolve()
    folder = (project or Path.cwd()).resolve()
    return folder / ".codex" / "hooks.json", folder


def _codex(path: str) -> str:
    found = shutil.which(path)
    if found is None:
        fail(f"cannot find the Codex CLI '{path}' to trust the hooks (pass --codex PATH); "
             "untrusted hooks are skipped by Codex without a warning")
    return found


@codex_app.command("install")
def install_command(
    agent: AgentOption,
    config: ConfigOption = None,
    example: ExampleOption = None,
    url: ServerUrlOption = None,
    token_env: TokenEnvOption = "HOOKGATE_TOKEN",
    project: ProjectOption = None,
    user: UserOption = False,
    codex: CodexOption = "codex",
    wait_s: WaitOption = None,
    check: Annotated[bool, typer.Option(
        "--check", help="Only check that the installed hooks load, are trusted and reach "
                        "hookgate.")] = False,
) -> None:
    """Write Codex's hooks.json so Codex asks hookgate about every tool call, and trust them.

    Each hook is one curl command posting to /api/codex/hooks?agent=ID with 'Authorization:
    Bearer $TOKEN_ENV'; anything short of hookgate's answer blocks the call (exit 2). Other
    hooks in the file are kept; earlier hookgate hooks are replaced.
    """
    from hookgate.coding_agents.codex_config import (
        CodexTrustFailed,
        hooks_block,
        merge_into,
        trust,
    )

    target, folder = _target(project, user)
    if check:
        _check(_codex(codex), folder, token_env)
        return
    server, wait = server_and_wait(agent, config, example, url, wait_s, token_env)
    binary = _codex(codex)
    block = hooks_block(server, agent, token_env=token_env, wait_s=wait)
    write_hooks(target, block, merge_into)
    console.print(f"wrote {target}: SessionStart, UserPromptSubmit, PreToolUse and "
                  f"PostToolUse hooks of agent '{agent}'; set {token_env} to your hookgate token",
                  highlight=False,
                  soft_wrap=True)
    try:
        hooks = trust(binary, folder, project=not user)
    except CodexTrustFailed as exc:
        fail(f"the hooks are written but NOT trusted, so Codex skips them silently: {exc}")
    if not user:
        console.print(f"trusted the project {folder} in Codex (its .codex/ folder loads)",
                      highlight=False, soft_wrap=True)
    for hook in hooks:
        if hook.ours:
            console.print(f"trusted {hook.key}", highlight=False, soft_wrap=True)


@codex_app.command("uninstall")
def uninstall_command(project: ProjectOption = None, user: UserOption = False) -> None:
    """Remove hookgate's hooks from Codex's hooks.json; every other hook is kept."""
    from hookgate.coding_agents.codex_config import remove_from

    remove_hooks(_target(project, user)[0], remove_from)


def _check(codex: str, folder: Path, token_env: str) -> None:
    """Codex lists hookgate's hooks as trusted and enabled for ``folder``, and the
    SessionStart one, run as Codex runs it, gets hookgate's answer."""
    from hookgate.coding_agents.codex_config import CodexTrustFailed, listed_hooks

    try:
        hooks = [h for h in listed_hooks(codex, folder) if h.ours]
    except CodexTrustFailed as exc:
        fail(f"check failed: {exc}")
    if not hooks:
        fail(f"check failed: Codex loads no hookgate hook for {folder} (not installed, or "
             "the project is not trusted)")
    skipped = [h.key for h in hooks if not (h.trusted and h.enabled)]
    if skipped:
        fail(f"check failed: Codex skips {', '.join(skipped)} silently (not trusted or "
             "disabled: run hookgate codex install again)")
    start = next((h for h in hooks if h.event == "sessionStart"), None)
    if start is None:
        fail("check failed: no hookgate SessionStart hook to try")
    probe_session_start(start.command, folder, token_env, {"source": "check"})
    console.print(f"ok: {len(hooks)} hookgate hooks load trusted for {folder}, and hookgate "
                  "answered the SessionStart one", highlight=False, soft_wrap=True)
