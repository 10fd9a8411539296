#!/usr/bin/env bash
# Install the pinned Claude Code CLI into .cache/claude-code (gitignored) for the tests that
# drive the real CLI. The native binary arrives from the npm registry as an optional
# dependency; nothing is downloaded from anywhere else. Prints the binary's path.
set -euo pipefail
cd "$(dirname "$0")/.."
version="2.1.332"
prefix=".cache/claude-code"
bin="$prefix/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
stamp="$prefix/.installed-$version"
if [ ! -x "$bin" ] || [ ! -f "$stamp" ]; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
    "@anthropic-ai/claude-code@$version" >&2
  touch "$stamp"
fi
realpath "$bin"
