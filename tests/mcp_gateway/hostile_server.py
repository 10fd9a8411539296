"""A downstream MCP server over stdio that answers its calls with hostile bytes, written from
the protocol: each tool names what its answer does.

``echo`` says its text back; ``split`` answers in small pieces with pauses between them,
cutting a multi-byte character in two; ``not_utf8`` answers with bytes that are not UTF-8;
``nan`` with a NaN number in its structured content; ``surrogate`` with an escaped lone
surrogate; ``deep`` with JSON nested past any parser's depth; ``reused`` answers an id
nobody asked, then its own id twice; ``huge`` answers with a text of
``$HOSTILE_HUGE_BYTES`` bytes; ``off_schema`` with structured content that breaks the
output schema it declares; ``guessed`` first answers the id the next request will likely
carry, then its own; ``slow`` answers after ``SLOW_S`` seconds; ``cancels`` says which
requests were ``slow`` and which the client cancelled (``notifications/cancelled``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

TEXT = {"type": "object", "properties": {"text": {"type": "string"}}}
NAMES = ["echo", "split", "not_utf8", "nan", "surrogate", "deep", "reused", "huge",
         "guessed", "slow", "cancels"]
TOOLS = [{"name": n, "inputSchema": TEXT, "annotations": {"readOnlyHint": True}}
         for n in NAMES]
#: Declared by ``off_schema``, whose structured content breaks it.
COUNT = {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}
TOOLS.append({"name": "off_schema", "inputSchema": TEXT, "outputSchema": COUNT,
              "annotations": {"readOnlyHint": True}})
#: Said by ``split``: Czech, two bytes per accented letter.
SPLIT_TEXT = "příliš žluťoučký kůň"
#: How long ``slow`` takes (longer than the tests' ``timeout_s``).
SLOW_S = 3.0
#: Ids of the ``slow`` calls, and the ids the client said it cancelled.
SEEN: dict[str, list[Any]] = {"slow": [], "cancelled": []}


def write(raw: bytes) -> None:
    sys.stdout.buffer.write(raw)
    sys.stdout.buffer.flush()


def result_line(msg_id: Any, result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result},
                      ensure_ascii=False).encode() + b"\n"


def text_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def call(msg_id: Any, name: str, args: dict[str, Any]) -> None:
    head = b'{"jsonrpc": "2.0", "id": ' + json.dumps(msg_id).encode() + b', "result": '
    if name == "split":
        line = result_line(msg_id, text_result(SPLIT_TEXT))
        cut = line.index("ř".encode()) + 1  # inside the two bytes of one character
        for piece in (line[:cut], line[cut:cut + 7], line[cut + 7:]):
            write(piece)
            time.sleep(0.05)
    elif name == "not_utf8":
        write(head + b'{"content": [{"type": "text", "text": "\xff\xfe"}]}}\n')
    elif name == "nan":
        write(head + b'{"content": [{"type": "text", "text": "n"}], '
              b'"structuredContent": {"n": NaN}}}\n')
    elif name == "surrogate":
        write(head + b'{"content": [{"type": "text", "text": "a\\ud800b"}]}}\n')
    elif name == "deep":
        write(head + b'{"content": [], "_meta": {"d": ' + b"[" * 100_000 + b"]" * 100_000
              + b"}}}\n")
    elif name == "reused":
        write(result_line(999_999, text_result("not asked")))
        write(result_line(msg_id, text_result("first")))
        write(result_line(msg_id, text_result("second")))
    elif name == "huge":
        write(result_line(msg_id, text_result("h" * int(os.environ["HOSTILE_HUGE_BYTES"]))))
    elif name == "guessed":
        write(result_line(next_id(msg_id), text_result("planted")))
        write(result_line(msg_id, text_result("guessed")))
    elif name == "slow":
        SEEN["slow"].append(msg_id)
        time.sleep(SLOW_S)
        write(result_line(msg_id, text_result("late")))
    elif name == "cancels":
        write(result_line(msg_id, text_result(json.dumps(SEEN))))
    elif name == "off_schema":
        write(result_line(msg_id, {**text_result("many"), "structuredContent": {"n": "many"}}))
    else:
        write(result_line(msg_id, text_result(str(args.get("text")))))


def next_id(msg_id: Any) -> Any:
    # The id a client that counts its requests gives the next one ("x-7" -> "x-8", 7 -> 8).
    if isinstance(msg_id, int):
        return msg_id + 1
    head, _, number = str(msg_id).rpartition("-")
    return f"{head}-{int(number) + 1}" if number.isdigit() else f"{msg_id}-1"


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("method") == "notifications/cancelled":
            SEEN["cancelled"].append((msg.get("params") or {}).get("requestId"))
        if "id" not in msg or "method" not in msg:
            continue  # a notification or a response
        method, params = msg["method"], msg.get("params") or {}
        if method == "initialize":
            write(result_line(msg["id"], {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"}}))
        elif method == "tools/list":
            write(result_line(msg["id"], {"tools": TOOLS}))
        elif method == "tools/call":
            call(msg["id"], params.get("name"), params.get("arguments") or {})
        else:
            write(result_line(msg["id"], {}))


if __name__ == "__main__":
    main()
