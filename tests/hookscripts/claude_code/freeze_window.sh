#!/bin/sh
# Stop everything during a change freeze (PreToolUse, any tool): continue false + stopReason.
cat > /dev/null
if [ -f "$CLAUDE_PROJECT_DIR/.claude/FREEZE" ]; then
  echo '{"continue": false, "stopReason": "Change freeze in effect: no tool calls today"}'
fi
exit 0
