"""A downstream MCP server over stdio that misbehaves on request, written from the protocol.

Tools: ``echo`` (answers), ``nap`` (sleeps first), ``crash`` (the process exits), ``garbled``
(answers with a result that is not a tool result), ``fails`` (a tool error). ``echo`` and
``fails`` end their text with ``$FLAKY_SUFFIX`` (what the server says beyond what it was
sent). It also has one resource and one prompt. Every ``tools/call`` it receives is appended
to ``$FLAKY_LOG``; ``FLAKY_MODE=silent`` makes it never answer at all; with ``FLAKY_GATE``
it reads nothing until that file exists (a server that is slow to come up, for as long as a
test wants); ``FLAKY_PID`` names a file it writes its process id to as it starts.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
TOOLS = [
    {"name": "echo", "description": "Says it back.", "inputSchema": TEXT,
     "annotations": {"readOnlyHint": True}},
    {"name": "nap", "description": "Sleeps, then says it back.",
     "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
    {"name": "crash", "description": "Exits the process.", "inputSchema": {"type": "object"}},
    {"name": "garbled", "description": "Answers nonsense.", "inputSchema": {"type": "object"}},
    {"name": "fails", "description": "Reports an error.", "inputSchema": {"type": "object"}},
]


SUFFIX = os.environ.get("FLAKY_SUFFIX", "")


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(msg_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    if method == "initialize":
        return {"protocolVersion": "2025-06-18", "serverInfo": {"name": "flaky", "version": "1"},
                "capabilities": {"tools": {}, "resources": {}, "prompts": {}}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        with open(os.environ["FLAKY_LOG"], "a") as log:
            log.write(json.dumps({"name": name, "args": args}) + "\n")
        if name == "nap":
            time.sleep(float(args.get("seconds", 1)))
            return {"content": [{"type": "text", "text": "rested"}]}
        if name == "crash":
            os._exit(3)
        if name == "garbled":
            return {"content": "this is not a list of content blocks"}
        if name == "fails":
            return {"content": [{"type": "text", "text": "disk full" + SUFFIX}], "isError": True}
        return {"content": [{"type": "text", "text": str(args.get("text")) + SUFFIX}]}
    if method == "resources/list":
        return {"resources": [{"uri": "memo://today", "name": "today", "mimeType": "text/plain"}]}
    if method == "resources/read":
        return {"contents": [{"uri": params["uri"], "mimeType": "text/plain",
                              "text": "buy milk"}]}
    if method == "prompts/list":
        return {"prompts": [{"name": "greet", "arguments": [{"name": "who",
                                                             "required": True}]}]}
    if method == "prompts/get":
        who = (params.get("arguments") or {}).get("who", "you")
        return {"messages": [{"role": "user",
                              "content": {"type": "text", "text": f"Say hello to {who}."}}]}
    if method == "ping":
        return {}
    send({"jsonrpc": "2.0", "id": msg_id,
          "error": {"code": -32601, "message": f"no method {method}"}})
    return None


def main() -> None:
    if os.environ.get("FLAKY_PID"):
        with open(os.environ["FLAKY_PID"], "w") as out:
            out.write(str(os.getpid()))
    if os.environ.get("FLAKY_MODE") == "silent":
        time.sleep(3600)
    gate = os.environ.get("FLAKY_GATE")
    while gate and not os.path.exists(gate):
        time.sleep(0.02)
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg or "method" not in msg:
            continue  # a notification or a response
        result = answer(msg["id"], msg["method"], msg.get("params") or {})
        if result is not None:
            send({"jsonrpc": "2.0", "id": msg["id"], "result": result})


if __name__ == "__main__":
    main()
