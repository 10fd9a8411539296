"""Reference pages generated from the code at docs build time: the configuration file from
its pydantic schema, the CLI from its Typer app, the HTTP API from the app's OpenAPI
description. mkdocs_hooks.py puts each where a page says ``<!-- generated: NAME -->``."""

from __future__ import annotations

import inspect
import re
import tempfile
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined


def _type_name(annotation: Any) -> str:
    """A type as a reader of the YAML file thinks of it (a section's name for a model)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(repr(a).replace("'", '"') for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(_type_name(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "section"
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _notes(model: type[BaseModel]) -> dict[str, str]:
    """The ``#:`` comment lines written right above each field in the class body."""
    notes: dict[str, str] = {}
    pending: list[str] = []
    for line in inspect.getsource(model).splitlines():
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        field = re.match(r"(\w+)\s*:", stripped)
        if field and pending:
            notes[field.group(1)] = " ".join(pending)
        pending = []
    return notes


def _default(info: Any) -> str:
    if info.default_factory is not None:
        value = info.default_factory()
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    if value is None:
        return "—"
    if isinstance(value, BaseModel):
        return "see below"
    if value in ([], {}):
        return f"`{value}`"
    return f"`{value!r}`".replace("'", '"') if isinstance(value, str) else f"`{value}`"


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found.extend(_models_in(arg))
    return found


def config_reference() -> str:
    """Every section and key of the configuration file, walked from ``HookgateConfig``."""
    from hookgate.config.schema import HookgateConfig

    out: list[str] = []
    seen: set[type[BaseModel]] = set()
    queue: list[tuple[str, type[BaseModel]]] = [("(top level)", HookgateConfig)]
    while queue:
        where, model = queue.pop(0)
        if model in seen:
            continue
        seen.add(model)
        out.append(f"### `{where}`\n")
        doc = inspect.getdoc(model)
        if doc and model.__doc__:  # its own docstring, not an inherited one
            out.append(doc.split("\n\n")[0] + "\n")
        out.append("| key | type | default | notes |\n|---|---|---|---|")
        notes = _notes(model)
        for name, info in model.model_fields.items():
            key = info.alias or name
            kind = _type_name(info.annotation).replace("|", "\\|")
            note = (notes.get(name, "") or (info.description or "")).replace("|", "\\|")
            out.append(f"| `{key}` | `{kind}` | {_default(info)} | {note} |")
            subs = _models_in(info.annotation)
            for sub in subs:
                path = key if where == "(top level)" else f"{where}.{key}"
                if len(subs) > 1:  # a tagged union: one section per kind
                    tag = typing.get_args(sub.model_fields["type"].annotation)
                    path = f"{path} (type: {tag[0]})" if tag else path
                queue.append((path, sub))
        out.append("")
    return "\n".join(out)


def cli_reference() -> str:
    """Every command's help, as ``hookgate COMMAND --help`` prints it."""
    import click
    import typer
    from typer.testing import CliRunner

    from hookgate.cli.main import app

    root = typer.main.get_command(app)
    runner = CliRunner()
    out: list[str] = []

    def walk(command: Any, path: list[str]) -> None:
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "100", "NO_COLOR": "1",
                                                             "TERM": "dumb"})
        title = " ".join(["hookgate", *path])
        text = "\n".join(line.rstrip() for line in result.output.strip("\n").splitlines())
        out.append(f"### `{title}`\n\n```text\n{text}\n```\n")
        if hasattr(command, "list_commands"):  # a group (Typer's own class in recent Typer)
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, [*path, name])

    walk(root, [])
    return "\n".join(out)


def openapi_description() -> dict[str, Any]:
    """The server's OpenAPI description, from an app built on the bundled example (nothing
    is started: no database is opened, no port taken)."""
    from hookgate.app import create_app
    from hookgate.config.loader import load_config
    from hookgate.examples import __file__ as examples_init
    from hookgate.runtime.deployment import deployment_from_config
    from hookgate.runtime.runtime import Runtime

    example = Path(examples_init).with_name("purchasing.yaml")
    with tempfile.TemporaryDirectory() as scratch:
        cfg = load_config(example)
        cfg.database = f"sqlite+aiosqlite:///{Path(scratch) / 'openapi.db'}"
        app = create_app(Runtime(deployment_from_config(cfg)))
        return app.openapi()


def http_reference() -> str:
    """One section per route of the OpenAPI description: method, path, summary, body."""
    spec = openapi_description()
    out: list[str] = []
    for path, methods in sorted(spec["paths"].items()):
        for method, op in methods.items():
            out.append(f"### `{method.upper()} {path}`\n")
            text = op.get("description") or op.get("summary") or ""
            if text:
                out.append(text.strip() + "\n")
            params = [p for p in op.get("parameters", []) if p.get("in") != "header"]
            if params:
                out.append("Parameters: " + ", ".join(
                    f"`{p['name']}` ({p['in']}{', required' if p.get('required') else ''})"
                    for p in params) + "\n")
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                ref = body["schema"].get("$ref", "")
                name = ref.rsplit("/", 1)[-1]
                schema = spec.get("components", {}).get("schemas", {}).get(name, {})
                fields = ", ".join(f"`{k}`" + ("" if k in schema.get("required", []) else "?")
                                   for k in schema.get("properties", {}))
                out.append(f"Body (JSON): `{name}` {{{fields}}}\n" if name else
                           "Body: JSON\n")
            codes = ", ".join(sorted(op.get("responses", {})))
            out.append(f"Responses: {codes}\n")
    return "\n".join(out)


GENERATORS: dict[str, Callable[[], str]] = {
    "configuration": config_reference,
    "cli": cli_reference,
    "http-api": http_reference,
}
