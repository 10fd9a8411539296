#!/usr/bin/env python3
"""Refuse writes to .env files (PreToolUse, matcher "Edit, Write"): exit 2, JSON reason."""
import json
import sys

data = json.load(sys.stdin)
path = data.get("tool_input", {}).get("file_path", "")
if path.endswith(".env"):
    print(json.dumps({"decision": "block", "reason": "Secrets files are protected"}))
    print("stderr text: blocked", file=sys.stderr)
    sys.exit(2)
