#!/usr/bin/env bash
# The pinned GitHub Copilot CLI (@github/copilot), for the tests that drive the real CLI;
# prints the launcher's path. On its first start it unpacks ~235 MB into
# $COPILOT_CACHE_HOME: the tests point that at .cache/copilot-home/ so every run reuses it.
set -euo pipefail
exec bash "$(dirname "$0")/install_npm_cli.sh" "@github/copilot" "1.0.102" copilot \
  node_modules/.bin/copilot
