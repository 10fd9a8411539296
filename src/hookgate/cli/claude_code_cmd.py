"""``hookgate claude-code install --agent ID``: write (or print) the hooks block that makes
hookgate the approval backend of Claude Code in a project."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from hookgate.cli.app import app, console, fail
from hookgate.cli.config_source import ConfigOption, ExampleOption, load_from_options
from hookgate.cli.hook_install_options import (
    AgentOption,
    ServerUrlOption,
    TokenEnvOption,
    hook_server,
    write_hooks,
)

claude_app = typer.Typer(help="Claude Code: hookgate as its remote approval backend.",
                         no_args_is_help=True)
app.add_typer(claude_app, name="claude-code")


@claude_app.command("install")
def install_command(
    agent: AgentOption,
    config: ConfigOption = None,
    example: ExampleOption = None,
    url: ServerUrlOption = None,
    token_env: TokenEnvOption = "HOOKGATE_TOKEN",
    project: Annotated[Path, typer.Option(
        "--project", file_okay=False, help="The project whose .claude/settings.json is "
                                           "written.")] = Path("."),
    print_only: Annotated[bool, typer.Option(
        "--print", help="Print the block instead of writing it.")] = False,
    acts_for: Annotated[str | None, typer.Option(
        "--acts-for", help="With a service identity's token: the person its calls act for "
                           "(their initiator), sent as the Hookgate-Acts-For header; a user "
                           "id, or '$NAME' to read it from that environment variable.")
    ] = None,
) -> None:
    """Write PROJECT/.claude/settings.json so Claude Code asks hookgate about every tool call.

    The handlers post to /api/claude-code/hooks?agent=ID with 'Authorization: Bearer
    $TOKEN_ENV' and block the call when hookgate cannot be reached. Other settings and
    hooks in the file are kept; earlier hookgate handlers are replaced.
    """
    from hookgate.claude_code.policy import ExternalPolicy
    from hookgate.claude_code.settings_block import merge_into, settings_block
    from hookgate.coding_agents.forwarder import is_env_name
    from hookgate.config import ConfigError
    from hookgate.hooks.errors import HookBuildError

    if not is_env_name(token_env):
        fail(f"--token-env {token_env!r} is not an environment variable name")
    _check_acts_for(acts_for)
    wait_s = 20.0
    server = url
    if config is not None or example is not None:
        cfg = load_from_options(config, example, code=1)
        try:
            wait_s = ExternalPolicy.of(cfg.build_agent(agent)).wait_s
        except (ConfigError, HookBuildError) as exc:
            fail(str(exc))
        server = server or cfg.server.public_url
    server = hook_server(server)
    block = settings_block(server, agent, token_env=token_env,
                           wait_s=wait_s, acts_for=acts_for)
    if print_only:
        typer.echo(json.dumps(block, indent=2))
        return
    target = project / ".claude" / "settings.json"
    write_hooks(target, block, merge_into)
    console.print(f"wrote {target}: Claude Code now asks hookgate about every tool call of "
                  f"agent '{agent}'; set {token_env} to your hookgate token", highlight=False,
                  soft_wrap=True)


@claude_app.command("forward")
def forward_command(
    url: Annotated[str, typer.Argument(
        help="hookgate's hook endpoint, /api/claude-code/hooks?agent=ID on the server.")],
    token_env: Annotated[str, typer.Option(
        "--token-env", help="The environment variable holding the developer's hookgate "
                            "token.")] = "HOOKGATE_TOKEN",
    timeout: Annotated[float, typer.Option(
        "--timeout", min=0.1, help="Seconds to wait for hookgate's answer.")] = 25.0,
    acts_for: Annotated[str | None, typer.Option(
        "--acts-for", help="The person a service identity's calls act for (a user id, or "
                           "'$NAME' for an environment variable).")] = None,
) -> None:
    """Post the Claude Code hook input on stdin to hookgate and print its answer.

    For events Claude Code sends only to command hooks (SessionStart); `install` writes it.
    When hookgate cannot be reached the hook fails (exit 1, the reason on stderr): Claude
    Code goes on, and hookgate's http handlers, which block when it is unreachable, refuse
    the session's prompts and tool calls.
    """
    import sys

    from hookgate.claude_code.forward import MAX_INPUT, Forward, ForwardFailed
    from hookgate.coding_agents.forwarder import is_env_name

    if not is_env_name(token_env):
        fail(f"--token-env {token_env!r} is not an environment variable name")
    _check_acts_for(acts_for)
    try:
        # One byte past the limit is enough to refuse an input that is too long.
        answer = Forward(url, token_env, timeout, acts_for).send(
            sys.stdin.buffer.read(MAX_INPUT + 1))
    except ForwardFailed as exc:
        fail(f"hookgate claude-code forward: {exc}")
    typer.echo(answer)


def _check_acts_for(acts_for: str | None) -> None:
    if acts_for is None:
        return
    if not acts_for or len(acts_for) > 128 or any(c.isspace() or not c.isprintable()
                                                   for c in acts_for):
        fail(f"--acts-for {acts_for!r} is not a user id or '$NAME'")
    if acts_for.startswith("$") and not acts_for[1:].isidentifier():
        fail(f"--acts-for {acts_for!r}: '$' starts an environment variable name")
