#!/usr/bin/env python3
"""Read the session transcript: note the user's prompt and how many tool calls the
assistant has made so far (PreToolUse, every tool). Claude Code appends to the transcript
through a write queue while hooks run: its last line may be half written (that line is not
read yet), and under load the file, or the prompt in it, may not be there yet when the first
hook runs (read again, for up to ten seconds)."""
import json
import os
import sys
import time


def read(path):
    try:
        with open(path) as f:
            lines = f.readlines()
    except FileNotFoundError:
        return None, 0
    prompt, tool_uses = None, 0
    for line in lines:
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
    return prompt, tool_uses


data = json.load(sys.stdin)
deadline = time.monotonic() + 10
prompt, tool_uses = read(data["transcript_path"])
while prompt is None and time.monotonic() < deadline:
    time.sleep(0.05)
    prompt, tool_uses = read(data["transcript_path"])
out = os.path.join(os.environ["CLAUDE_PROJECT_DIR"], ".claude", "transcript.log")
with open(out, "a") as f:
    f.write(json.dumps({"prompt": prompt, "tool_uses_so_far": tool_uses}) + "\n")
