"""``hookgate hooks``: the hook catalog a declaration may name."""

from __future__ import annotations

from rich.table import Table

from hookgate.cli.app import app, console


@app.command("hooks")
def hooks_command() -> None:
    """List the hook catalog: names (and aliases) usable in model_config_json.hooks."""
    from hookgate.catalog import catalog_entries

    table = Table(title="hookgate hook catalog", title_justify="left")
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("aliases", no_wrap=True)
    table.add_column("source", no_wrap=True)
    table.add_column("description")
    for entry in catalog_entries():
        table.add_row(entry.name, ", ".join(entry.aliases) or "-", entry.source,
                      entry.description)
    console.print(table)
    console.print("Declare any other hook class as 'module:Class' "
                  "(model_config_json.hooks.class_hooks).", highlight=False)
