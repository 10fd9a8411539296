"""How every ``hookgate`` command's help reads: ``MESSAGE`` and ``[STATE]`` in usage lines
(not ``{message}``), no ``<bool>`` after flags, and the top-level commands in panels.

Applied once to the whole command tree in ``main.py``, after every module registered its
commands, so a command added later gets the same help without doing anything.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.main import get_command_name
from typer.models import CommandInfo, DefaultPlaceholder, TyperInfo

#: Top-level help panels, in the order a newcomer meets them; others go under "Commands".
PANELS: dict[str, str] = {
    "demo": "Start here", "run": "Start here", "check": "Start here", "hooks": "Start here",
    "serve": "Server", "worker": "Server", "approvals": "Server", "users": "Server",
    "orgs": "Server", "rules": "Server", "policy": "Server", "login": "Server",
    "logout": "Server",
    "claude-code": "Integrations", "codex": "Integrations", "copilot": "Integrations",
    "cursor": "Integrations", "gemini": "Integrations", "mcp": "Integrations",
    "workflow": "Workflows and evals", "eval": "Workflows and evals",
    "db": "Maintenance", "audit": "Maintenance", "secrets": "Maintenance",
}


def _argument_name(param: TyperArgument) -> str:
    name = param.metavar or (param.name or "").upper()
    shown = name if param.required else f"[{name}]"
    return shown + ("..." if param.nargs != 1 else "")


def _plain_help_option(option: TyperOption | None) -> TyperOption | None:
    if option is not None and option.metavar is None:
        option.metavar = ""  # a flag takes no value: show none
    return option


class HookgateCommand(TyperCommand):
    """A command whose arguments read ``NAME`` and whose flags show no value type."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, TyperArgument) and param.metavar is None:
                param.metavar = (param.name or "").upper()
            elif isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
                param.metavar = ""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                pieces.append(_argument_name(param))
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def get_help_option(self, ctx: Any) -> TyperOption | None:
        return _plain_help_option(super().get_help_option(ctx))


class HookgateGroup(TyperGroup):
    """A command group whose ``--help`` shows no value type."""

    def get_help_option(self, ctx: Any) -> TyperOption | None:
        return _plain_help_option(super().get_help_option(ctx))


def _unset(value: object) -> bool:
    return value is None or isinstance(value, DefaultPlaceholder)


def _name(info: CommandInfo | TyperInfo) -> str:
    if isinstance(info.name, str):
        return info.name
    callback = info.callback
    return get_command_name(callback.__name__) if callback is not None else ""


def apply(app: typer.Typer, *, top: bool = True) -> None:
    """Give every command and group under ``app`` the classes above (and the top panels)."""
    if _unset(app.info.cls) or app.info.cls is TyperGroup:
        app.info.cls = HookgateGroup
    if top:  # within a panel, commands are listed in the order of PANELS
        rank = {name: i for i, name in enumerate(PANELS)}
        app.registered_commands.sort(key=lambda c: rank.get(_name(c), len(rank)))
        app.registered_groups.sort(key=lambda g: rank.get(_name(g), len(rank)))
    for command in app.registered_commands:
        if command.cls is None or command.cls is TyperCommand:
            command.cls = HookgateCommand
        if top and _unset(command.rich_help_panel):
            command.rich_help_panel = PANELS.get(_name(command), "Commands")
    for group in app.registered_groups:
        if _unset(group.cls) or group.cls is TyperGroup:
            group.cls = HookgateGroup
        if top and _unset(group.rich_help_panel):
            group.rich_help_panel = PANELS.get(_name(group), "Commands")
        if group.typer_instance is not None:
            apply(group.typer_instance, top=False)
