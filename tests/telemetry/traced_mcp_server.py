"""A downstream MCP server over streamable HTTP on 127.0.0.1, built with the official SDK.

Its tool ``echo`` says its text back; ``fails`` reports a tool error (``isError``). For
every ``tools/call`` it appends to ``$TRACED_LOG`` the ``traceparent`` it got as an HTTP
header and in ``params._meta``, so a test can check that the caller's trace reached it both
ways. Usage: ``python -m
tests.telemetry.traced_mcp_server PORT``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

ECHO = types.Tool(name="echo", description="Says it back.", input_schema={
    "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})

FAILS = types.Tool(name="fails", description="Reports an error.",
                   input_schema={"type": "object"})


async def list_tools(ctx: ServerRequestContext[Any, Any],
                     params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[ECHO, FAILS])


async def call_tool(ctx: ServerRequestContext[Any, Any],
                    params: types.CallToolRequestParams) -> types.CallToolResult:
    headers = ctx.request.headers if ctx.request is not None else {}
    record({"header": headers.get("traceparent"), "meta": dict(ctx.meta or {}).get("traceparent")})
    if params.name == "fails":
        return types.CallToolResult(content=[types.TextContent(text="disk full")],
                                    is_error=True)
    text = str((params.arguments or {}).get("text"))
    return types.CallToolResult(content=[types.TextContent(text=text)])


def record(entry: dict[str, Any]) -> None:
    with open(os.environ["TRACED_LOG"], "a") as log:
        log.write(json.dumps(entry) + "\n")


def main() -> None:
    server = Server("traced", on_list_tools=list_tools, on_call_tool=call_tool)
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[1]),
                log_level="warning")


if __name__ == "__main__":
    main()
