#!/bin/sh
# Prints progress as plain text; Claude Code shows it to people, never the model.
cat > /dev/null
echo "checking the call..."
exit 0
