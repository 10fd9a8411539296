#!/usr/bin/env bash
# The pinned Gemini CLI (@google/gemini-cli), for the tests that drive the real CLI; prints
# the launcher's path.
set -euo pipefail
exec bash "$(dirname "$0")/install_npm_cli.sh" "@google/gemini-cli" "0.61.0" gemini-cli \
  node_modules/.bin/gemini
