#!/usr/bin/env python3
"""Read the session transcript: note the user's prompt and how many tool calls the
assistant has made so far (PreToolUse, every tool). Claude Code appends to the transcript
while hooks run, so its last line may be half written: that line is not read yet."""
import json
import os
import sys

data = json.load(sys.stdin)
prompt, tool_uses = None, 0
with open(data["transcript_path"]) as f:
    for line in f:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:  # still being written
            break
        message = entry.get("message") or {}
        content = message.get("content")
        if entry.get("type") == "user" and prompt is None:
            if isinstance(content, str):
                prompt = content
            elif isinstance(content, list):
                texts = [b.get("text") for b in content if b.get("type") == "text"]
                prompt = texts[-1] if texts else None
        if entry.get("type") == "assistant" and isinstance(content, list):
            tool_uses += sum(1 for b in content if b.get("type") == "tool_use")
out = os.path.join(os.environ["CLAUDE_PROJECT_DIR"], ".claude", "transcript.log")
with open(out, "a") as f:
    f.write(json.dumps({"prompt": prompt, "tool_uses_so_far": tool_uses}) + "\n")
