"""The run's conversation as a Claude Code transcript: a JSONL file hooks can read.

Claude Code hands every hook ``transcript_path``, a JSONL file with one entry per message
(``type`` user or assistant, ``message`` in the Messages API shape: text, ``tool_use`` and
``tool_result`` blocks, plus ``uuid``, ``parentUuid``, ``sessionId``, ``timestamp``,
``cwd``). Published hooks read it (the last prompt, what the assistant said). Runs whose
agent has declarative hooks get one, rewritten before each turn's tool calls and deleted
when the run ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_DIR = "hookgate-transcripts"


def transcript_file(run_id: str) -> Path:
    """Where the transcript of ``run_id`` is kept (the system's temporary directory)."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in run_id)[:120]
    return Path(tempfile.gettempdir()) / _DIR / f"{safe}.jsonl"


def write_transcript(run_id: str, messages: Iterable[Mapping[str, Any]]) -> str:
    """Write the transcript of ``messages`` (OpenAI-shaped, as runs keep them); its path."""
    path = transcript_file(run_id)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    cwd = os.getcwd()
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    parent: str | None = None
    lines: list[str] = []
    for message in messages:
        entry = _entry(message)
        if entry is None:
            continue
        me = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{run_id}/{len(lines)}"))
        lines.append(json.dumps({
            "parentUuid": parent, "isSidechain": False, "type": entry["role"],
            "message": entry, "uuid": me, "sessionId": run_id, "timestamp": now, "cwd": cwd,
        }, ensure_ascii=False, default=str))
        parent = me
    tmp = path.with_suffix(".tmp")
    # Only this user may read it: it holds the conversation.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    os.replace(tmp, path)
    return str(path)


def remove_transcript(path: str | None) -> None:
    """Delete a run's transcript once the run has ended."""
    if path:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _entry(message: Mapping[str, Any]) -> dict[str, Any] | None:
    role = message.get("role")
    content = message.get("content")
    if role == "user":
        return {"role": "user", "content": str(content or "")}
    if role == "tool":
        return {"role": "user", "content": [{
            "type": "tool_result", "tool_use_id": message.get("tool_call_id"),
            "content": str(content or "")}]}
    if role == "assistant":
        blocks: list[dict[str, Any]] = []
        if content:
            blocks.append({"type": "text", "text": str(content)})
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            try:
                args = json.loads(function.get("arguments") or "{}")
            except (TypeError, ValueError):
                args = {"raw_arguments": function.get("arguments")}
            blocks.append({"type": "tool_use", "id": call.get("id"),
                           "name": function.get("name"), "input": args})
        return {"role": "assistant", "content": blocks}
    return None  # the system prompt is not part of a Claude Code transcript
