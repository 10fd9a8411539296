"""The ``hookgate`` command line: one module per command group, all on one Typer app."""
