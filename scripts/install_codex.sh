#!/usr/bin/env bash
# Install the pinned Codex CLI (@openai/codex) into .cache/codex (gitignored) for the tests
# that drive the real CLI. Its native binary arrives from the npm registry as an optional
# dependency; nothing is downloaded from anywhere else. Prints the launcher's path.
set -euo pipefail
cd "$(dirname "$0")/.."
version="0.169.0"
prefix=".cache/codex"
bin="$prefix/node_modules/.bin/codex"
stamp="$prefix/.installed-$version"
if [ ! -x "$bin" ] || [ ! -f "$stamp" ]; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
    "@openai/codex@$version" >&2
  touch "$stamp"
fi
realpath "$bin"
