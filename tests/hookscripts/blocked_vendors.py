"""A Claude Code PreToolUse hook in Python, written to Claude Code's documented protocol:
the hook input is JSON on stdin; exit status 2 blocks the call with stderr as the reason."""

import json
import sys

BLOCKED = {"Shady Ltd", "Sanctioned Corp"}

event = json.load(sys.stdin)
vendor = event.get("tool_input", {}).get("vendor")
if event.get("hook_event_name") == "PreToolUse" and vendor in BLOCKED:
    print(f"vendor {vendor!r} is on the blocked list", file=sys.stderr)
    sys.exit(2)
sys.exit(0)
