"""The Typer application every command module registers onto, and the consoles they print to.

It lives apart from ``main.py`` so that ``python -m hookgate.cli.main`` and the installed
``hookgate`` script share one app object (a module run as ``__main__`` is a second copy).
"""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.text import Text

app = typer.Typer(
    name="hookgate",
    help="Hooks that make rules about an LLM agent's tool calls hold.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)



@app.callback()
def _commands() -> None:
    # A callback keeps ``app`` a group of commands when only the one a command line names is
    # registered (main.py); without one, Typer runs a lone command as the whole program.
    pass


console = Console()
err_console = Console(stderr=True)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: message`` to stderr and exit with ``code``."""
    err_console.print(Text.assemble(("error: ", "bold red"), message), soft_wrap=True)
    raise typer.Exit(code)
