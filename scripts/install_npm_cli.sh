#!/usr/bin/env bash
# Install one pinned CLI from the npm registry into .cache/ (gitignored) for the tests that
# drive the real program, once per version, and print the path of its executable:
#   bash scripts/install_npm_cli.sh PACKAGE VERSION FOLDER EXECUTABLE_IN_FOLDER
# A native binary arrives from the npm registry as an optional dependency; nothing is
# downloaded from anywhere else.
set -euo pipefail
cd "$(dirname "$0")/.."
package=$1 version=$2 prefix=".cache/$3" bin=".cache/$3/$4"
stamp="$prefix/.installed-$version"
if [ ! -x "$bin" ] || [ ! -f "$stamp" ]; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
    "$package@$version" >&2
  touch "$stamp"
fi
realpath "$bin"
