#!/bin/sh
# Deny git push with a JSON decision (PreToolUse, matcher Bash).
input=$(cat)
case "$input" in
  *"git push"*)
    printf '%s\n' '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "Pushing is not allowed from this machine"}}'
    ;;
esac
exit 0
