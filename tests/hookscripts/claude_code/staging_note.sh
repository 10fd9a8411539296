#!/bin/sh
# Before every Bash call, remind the model which environment it is in (PreToolUse, matcher
# Bash): allow, with additionalContext.
cat > /dev/null
echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "additionalContext": "Note: this machine is the staging server"}}'
