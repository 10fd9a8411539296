#!/usr/bin/env python3
"""Stop the session once a deploy ran, so a person reviews it (PostToolUse, matcher Bash):
``continue: false`` with a ``stopReason``."""
import json
import sys

data = json.load(sys.stdin)
if "deploy" in data.get("tool_input", {}).get("command", ""):
    print(json.dumps({"continue": False,
                      "stopReason": "Deploy finished: stopping for a human review"}))
sys.exit(0)
