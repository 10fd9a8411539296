#!/usr/bin/env bash
# A Claude Code PreToolUse hook, written to Claude Code's documented protocol and nothing
# else: the hook input arrives as JSON on stdin; a JSON answer on stdout denies the call.
# Pure bash and grep (no jq): payments above 50,000 are denied with a reason.
input=$(cat)
amount=$(printf '%s' "$input" | grep -o '"amount": *[0-9]*' | head -n 1 | grep -o '[0-9]*$')
if [ -n "$amount" ] && [ "$amount" -gt 50000 ]; then
  cat <<JSON
{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "payments above 50,000 need a purchase order (asked for $amount)"}}
JSON
fi
exit 0
