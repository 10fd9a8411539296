#!/bin/sh
# After a Bash call, remind the model to run the tests (PostToolUse, matcher Bash).
cat > /dev/null
echo '{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "Reminder: run the test suite"}}'
