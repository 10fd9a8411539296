#!/usr/bin/env bash
# The pinned Codex CLI (@openai/codex), for the tests that drive the real CLI; prints the
# launcher's path.
set -euo pipefail
exec bash "$(dirname "$0")/install_npm_cli.sh" "@openai/codex" "0.169.0" codex \
  node_modules/.bin/codex
