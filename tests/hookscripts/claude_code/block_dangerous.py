#!/usr/bin/env python3
"""Block destructive shell commands (PreToolUse, matcher Bash): exit 2 with the reason on stderr."""
import json
import sys

data = json.load(sys.stdin)
command = data.get("tool_input", {}).get("command", "")
if "rm -rf" in command:
    print(f"Dangerous command blocked: {command}", file=sys.stderr)
    sys.exit(2)
sys.exit(0)
