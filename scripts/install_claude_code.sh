#!/usr/bin/env bash
# The pinned Claude Code CLI, for the tests that drive the real CLI; prints the binary's path.
set -euo pipefail
exec bash "$(dirname "$0")/install_npm_cli.sh" "@anthropic-ai/claude-code" "2.1.332" \
  claude-code node_modules/@anthropic-ai/claude-code-linux-x64/claude
