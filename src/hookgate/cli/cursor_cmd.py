"""``hookgate cursor install | uninstall``: write (or remove) the Cursor hooks that make
hookgate its approval backend — every entry ``"failClosed": true`` — and ``--check`` that
the installed command, run as Cursor runs it, gets hookgate's answer."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from hookgate.cli.app import app, console, fail
from hookgate.cli.config_source import ConfigOption, ExampleOption
from hookgate.cli.hook_install_options import (
    AgentOption,
    ServerUrlOption,
    TokenEnvOption,
    WaitOption,
    remove_hooks,
    server_and_wait,
    write_hooks,
)
from hookgate.coding_agents.cursor_config import Layer

cursor_app = typer.Typer(help="Cursor: hookgate as its remote approval backend.",
                         no_args_is_help=True)
app.add_typer(cursor_app, name="cursor")

ProjectOption = Annotated[Path | None, typer.Option(
    "--project", file_okay=False, help="Write PROJECT/.cursor/hooks.json (the default: the "
                                       "current folder).")]
UserOption = Annotated[bool, typer.Option(
    "--user", help="Write ~/.cursor/hooks.json (every project) instead.")]


def _target(project: Path | None, user: bool) -> tuple[Path, Path]:
    """The hooks.json to write and the folder Cursor works in."""
    folder = (project or Path.cwd()).resolve()
    if user:
        return Path.home() / ".cursor" / "hooks.json", folder
    return folder / ".cursor" / "hooks.json", folder


@cursor_app.command("install")
def install_command(
    agent: AgentOption,
    config: ConfigOption = None,
    example: ExampleOption = None,
    url: ServerUrlOption = None,
    token_env: TokenEnvOption = "HOOKGATE_TOKEN",
    project: ProjectOption = None,
    user: UserOption = False,
    wait_s: WaitOption = None,
    layer: Annotated[Layer, typer.Option(
        "--layer", help="tool: preToolUse and postToolUse, every tool (the default); "
                        "shell-mcp: beforeShellExecution, beforeMCPExecution and "
                        "afterShellExecution.",
        case_sensitive=False)] = Layer.TOOL,
    check: Annotated[bool, typer.Option(
        "--check", help="Only check the installed hooks: each fails closed, and the "
                        "command, run as Cursor runs it, gets hookgate's answer.")] = False,
) -> None:
    """Write Cursor's hooks.json so Cursor asks hookgate about every tool call.

    Each hook is one curl command posting to /api/cursor/hooks?agent=ID with 'Authorization:
    Bearer $TOKEN_ENV', marked "failClosed": true; anything short of hookgate's answer blocks
    the call. Other hooks in the file are kept; earlier hookgate hooks are replaced.
    """
    from hookgate.coding_agents.cursor_config import hooks_block, merge_into

    target, folder = _target(project, user)
    if check:
        _check(target, folder, token_env)
        return
    server, wait = server_and_wait(agent, config, example, url, wait_s, token_env)
    block = hooks_block(server, agent, token_env=token_env, wait_s=wait, layer=layer)
    write_hooks(target, block, merge_into)
    console.print(f"wrote {target}: {', '.join(block['hooks'])} hooks of agent '{agent}', "
                  f"each failClosed; set {token_env} in the environment Cursor starts from "
                  "to your hookgate token", highlight=False, soft_wrap=True)


@cursor_app.command("uninstall")
def uninstall_command(project: ProjectOption = None, user: UserOption = False) -> None:
    """Remove hookgate's hooks from Cursor's hooks.json; every other hook is kept."""
    from hookgate.coding_agents.cursor_config import remove_from

    remove_hooks(_target(project, user)[0], remove_from)


def _check(target: Path, folder: Path, token_env: str) -> None:
    """hookgate's entries in ``target`` guard a tool hook and fail closed, and the
    sessionStart one, run with Cursor's documented payload, gets hookgate's answer."""
    from hookgate.coding_agents.codec import Event
    from hookgate.coding_agents.cursor import EVENTS
    from hookgate.coding_agents.cursor_config import ours_in

    try:
        loaded: Any = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        fail(f"check failed: cannot read {target}: {exc}")
    ours = ours_in(loaded if isinstance(loaded, dict) else {})
    if not any(EVENTS.get(event) is Event.PRE_TOOL_USE for event in ours):
        fail(f"check failed: {target} has no hookgate hook before a tool runs (run hookgate "
             "cursor install)")
    open_ = [event for event, entry in ours.items() if entry.get("failClosed") is not True]
    if open_:
        fail(f"check failed: {', '.join(open_)} would let the call run when hookgate cannot "
             "answer (failClosed is not true: run hookgate cursor install again)")
    start = ours.get("sessionStart")
    if start is None:
        fail("check failed: no hookgate sessionStart hook to try")
    probe = json.dumps({"hook_event_name": "sessionStart", "conversation_id":
                        f"hookgate-check-{uuid.uuid4()}", "generation_id": "",
                        "session_id": "", "workspace_roots": [str(folder)],
                        "is_background_agent": False, "composer_mode": "agent"})
    timeout = start.get("timeout")
    try:
        done = subprocess.run(["sh", "-c", str(start["command"])], input=probe, text=True,
                              capture_output=True, cwd=folder, check=False,
                              timeout=timeout if isinstance(timeout, int | float) else 60)
    except subprocess.TimeoutExpired:
        fail("check failed: the hook did not end within its timeout")
    try:
        answer = json.loads(done.stdout) if done.returncode == 0 else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        said = (done.stdout.strip() or done.stderr.strip())[:300]
        fail(f"check failed: the hook does not reach hookgate: {said} (is {token_env} set?)")
    console.print(f"ok: {len(ours)} hookgate hooks in {target} fail closed, and hookgate "
                  "answered the sessionStart one", highlight=False, soft_wrap=True)
