"""``hookgate copilot install | uninstall``: write (or remove) the hooks file that makes
hookgate GitHub Copilot CLI's approval backend (the repository's
``.github/hooks/hookgate.json``, or with ``--user`` ``$COPILOT_HOME/hooks/hookgate.json``), and
``--check`` that Copilot itself runs them: ``copilot -p`` started offline, its model a
loopback socket that never answers, fires the sessionStart hook before it asks the model,
and the hook's ``curl`` is watched on its way to hookgate."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from hookgate.cli import hook_install_options as options
from hookgate.cli.app import app, console, fail
from hookgate.cli.config_source import ConfigOption, ExampleOption

copilot_app = typer.Typer(help="GitHub Copilot CLI: hookgate as its remote approval backend.",
                          no_args_is_help=True)
app.add_typer(copilot_app, name="copilot")

ProjectOption = Annotated[Path | None, typer.Option(
    "--project", file_okay=False, help="The repository whose .github/hooks/hookgate.json "
                                       "is written (the default: the current folder).")]
UserOption = Annotated[bool, typer.Option(
    "--user", help="Write $COPILOT_HOME/hooks/hookgate.json (~/.copilot by default: every "
                   "folder, copilot -p included) instead.")]
CopilotOption = Annotated[str, typer.Option(
    "--copilot", help="The Copilot CLI that --check runs.")]
#: How long --check waits for Copilot to run the sessionStart hook.
_CHECK_S = 90


def _target(project: Path | None, user: bool = False) -> tuple[Path, Path]:
    """hookgate's hooks file and the folder Copilot works in."""
    from hookgate.coding_agents.copilot_config import FILE, user_file

    folder = (project or Path.cwd()).resolve()
    if user:
        return user_file(os.environ, Path.home()), folder
    return folder / FILE, folder


@copilot_app.command("install")
def install_command(
    agent: options.AgentOption,
    config: ConfigOption = None,
    example: ExampleOption = None,
    url: options.ServerUrlOption = None,
    token_env: options.TokenEnvOption = "HOOKGATE_TOKEN",
    project: ProjectOption = None,
    user: UserOption = False,
    wait_s: options.WaitOption = None,
    copilot: CopilotOption = "copilot",
    check: Annotated[bool, typer.Option(
        "--check", help="Only check that Copilot runs the installed hooks (copilot -p, "
                        "offline) and that they reach hookgate.")] = False,
) -> None:
    """Write .github/hooks/hookgate.json so Copilot CLI asks hookgate about every tool call.

    Each hook is one curl command posting to /api/copilot/hooks?agent=ID&event=EVENT with
    'Authorization: Bearer $TOKEN_ENV'; anything short of hookgate's answer denies the call.
    Other hook files are never touched; other hooks in this one are kept. In 'copilot -p'
    Copilot skips repository hooks silently unless GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true
    is set (or the folder is trusted); user-level hooks (--user) need no opt-in.
    """
    from hookgate.coding_agents.copilot_config import (
        PROMPT_MODE_ENV,
        hooks_file,
        merge_into,
    )

    target, folder = _target(project, user)
    if check:
        _check(_copilot(copilot), folder, target, token_env, user=user)
        return
    server, wait = options.server_and_wait(agent, config, example, url, wait_s, token_env)
    options.write_hooks(target, hooks_file(server, agent, token_env=token_env, wait_s=wait),
                merge_into)
    console.print(f"wrote {target}: sessionStart, userPromptSubmitted, preToolUse and "
                  f"postToolUse hooks of agent '{agent}'; set {token_env} to your hookgate token",
                  highlight=False,
                  soft_wrap=True)
    if user:
        console.print("Copilot runs user-level hooks in every folder, copilot -p included "
                      "(no opt-in needed)", highlight=False, soft_wrap=True)
        return
    console.print(f"copilot -p loads repository hooks only with {PROMPT_MODE_ENV}=true in "
                  "its environment (or in a trusted folder); without it Copilot skips them "
                  f"silently: export {PROMPT_MODE_ENV}=true", highlight=False, soft_wrap=True)


@copilot_app.command("uninstall")
def uninstall_command(project: ProjectOption = None, user: UserOption = False) -> None:
    """Remove hookgate's hooks from .github/hooks/hookgate.json (with --user, from
    $COPILOT_HOME/hooks/hookgate.json; the file goes when nothing else is in it); every other
    hook is kept."""
    from hookgate.coding_agents.copilot_config import remove_from

    target, _ = _target(project, user)
    if not target.exists():
        console.print(f"{target} does not exist: nothing to remove", highlight=False)
        return
    try:
        kept = remove_from(target)
        if kept.get("hooks") or set(kept) - {"version", "hooks"}:
            target.write_text(json.dumps(kept, indent=2) + "\n", encoding="utf-8")
        else:
            target.unlink()
    except (ValueError, OSError) as exc:
        fail(f"cannot update {target}: {exc}")
    console.print(f"removed hookgate's hooks from {target}", highlight=False, soft_wrap=True)


def _copilot(path: str) -> str:
    found = shutil.which(path)
    if found is None:
        fail(f"cannot find the Copilot CLI '{path}' to check the hooks (pass --copilot PATH)")
    return found


def _check(copilot: str, folder: Path, target: Path, token_env: str, *,
           user: bool = False) -> None:
    """Copilot, started as ``copilot -p`` in ``folder`` with this environment (offline: its
    model is a closed port on 127.0.0.1), runs hookgate's sessionStart hook, and hookgate
    answers it with 200."""
    from hookgate.coding_agents.copilot_config import PROMPT_MODE_ENV, is_ours, remove_from

    try:
        hooks = json.loads(target.read_text(encoding="utf-8")).get("hooks", {})
        remove_from(target)
    except (OSError, ValueError, AttributeError) as exc:
        fail(f"check failed: cannot read {target}: {exc}")
    missing = [e for e in ("sessionStart", "userPromptSubmitted", "preToolUse",
                           "postToolUse")
               if not any(is_ours(h) for h in hooks.get(e, []))]
    if missing:
        fail(f"check failed: {target} has no hookgate hook for {', '.join(missing)} "
             "(run hookgate copilot install)")
    curl = shutil.which("curl")
    if curl is None:
        fail("check failed: curl is not installed, so every hook denies")
    with tempfile.TemporaryDirectory() as tmp:
        fired = Path(tmp) / "fired"
        watch = Path(tmp) / "bin"
        watch.mkdir()
        # curl as the hooks call it, noting its exit status and the HTTP status it got.
        (watch / "curl").write_text(
            f"#!/bin/sh\nout=$({shlex.quote(curl)} \"$@\"); rc=$?; printf '%s' \"$out\"\n"
            f"echo \"$rc ${{out#\"${{out%???}}\"}}\" >> {shlex.quote(str(fired))}\n"
            "exit $rc\n", encoding="utf-8")
        (watch / "curl").chmod(0o755)
        with socket.socket() as model:
            model.bind(("127.0.0.1", 0))
            model.listen()
            env = {**os.environ, "PATH": f"{watch}{os.pathsep}{os.environ.get('PATH', '')}",
                   "COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false",
                   "COPILOT_PROVIDER_BASE_URL":
                       f"http://127.0.0.1:{model.getsockname()[1]}/v1",
                   "COPILOT_PROVIDER_TYPE": "openai",
                   "COPILOT_PROVIDER_API_KEY": "hookgate-check",
                   "COPILOT_MODEL": os.environ.get("COPILOT_MODEL") or "gpt-4.1"}
            ran = _first_hook(copilot, folder, env, fired, model)
    if ran is None and user:
        fail(f"check failed: copilot -p did not run hookgate's user-level hooks ({target}) "
             f"in {folder}: is COPILOT_HOME the one Copilot runs with, or are hooks "
             "disabled (disableAllHooks)?")
    if ran is None:
        fail(f"check failed: copilot -p did not run hookgate's hooks in {folder}: it skips "
             f"repository hooks silently unless {PROMPT_MODE_ENV}=true is set (or the folder "
             "is trusted)")
    code, status = ran
    if code != "0" or status != "200":
        fail(f"check failed: Copilot ran the hook, but it got no answer from hookgate "
             f"(curl exit {code}, HTTP {status or 'none'}; is {token_env} set and the "
             "server up?)")
    console.print(f"ok: copilot -p ran hookgate's sessionStart hook in {folder}, and hookgate "
                  "answered it", highlight=False, soft_wrap=True)


def _first_hook(copilot: str, folder: Path, env: dict[str, str], fired: Path,
                model: socket.socket) -> tuple[str, str] | None:
    """(curl's exit status, HTTP status) of the sessionStart hook Copilot ran, or None when
    Copilot asked its model (or ended, or ran out of time) without running it."""
    proc = subprocess.Popen([copilot, "-p", "hookgate check"], cwd=folder,
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    model.settimeout(0.05)
    deadline = time.monotonic() + _CHECK_S
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                asked, _ = model.accept()
            except TimeoutError:
                continue
            asked.close()  # past sessionStart: the hook ran by now, or never will
            break
    finally:
        proc.kill()
        proc.wait()
    lines = fired.read_text().splitlines() if fired.exists() else []
    if not lines:
        return None
    code, _, status = lines[0].partition(" ")
    return code, status
