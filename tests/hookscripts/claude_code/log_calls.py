#!/usr/bin/env python3
"""Log every tool call to $CLAUDE_PROJECT_DIR/.claude/calls.log (PreToolUse, every tool)."""
import json
import os
import sys

data = json.load(sys.stdin)
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], ".claude", "calls.log"), "a") as f:
    f.write(f"{data['tool_name']} {json.dumps(data['tool_input'], sort_keys=True)}\n")
