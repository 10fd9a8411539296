"""Every HTTP route documents its 2xx answer in the OpenAPI description."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hookgate.app import mcp_operators
from hookgate.runtime.runtime import Runtime
from hookgate.server.app import create_app
from tests.server.demo_world import world

METHODS = ("get", "post", "put", "patch", "delete")


def documented_schema(operation: dict[str, Any]) -> bool:
    """A 2xx response whose body is described: a named model (or a list of one), or a
    stream or text with a schema. A bare ``dict`` (``{"type": "object", …}``) describes
    nothing."""
    for code, response in operation.get("responses", {}).items():
        if not str(code).startswith("2"):
            continue
        for media, content in (response.get("content") or {}).items():
            schema = content.get("schema") or {}
            if "$ref" in schema or "$ref" in (schema.get("items") or {}):
                return True
            if media != "application/json" and schema:
                return True
    return False


def test_every_route_documents_a_2xx_response_schema(tmp_path: Path) -> None:
    deployment, _ = world(f"sqlite+aiosqlite:///{tmp_path / 'api.db'}")
    app = create_app(Runtime(deployment))
    app.include_router(mcp_operators.router)  # served when the configuration has MCP servers
    spec = app.openapi()
    operations = [(path, method, op) for path, item in spec["paths"].items()
                  for method, op in item.items() if method in METHODS]
    assert len(operations) >= 29
    undocumented = [f"{method.upper()} {path}" for path, method, op in operations
                    if not documented_schema(op)]
    assert undocumented == []
    run = spec["paths"]["/api/runs/{run_id}"]["get"]["responses"]["200"]
    ref = run["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    assert {"run_id", "status", "trace"} <= set(spec["components"]["schemas"][ref]["properties"])
