#!/usr/bin/env bash
# The npm install shared by the tests that use npm packages (tests/openai_client,
# tests/anthropic_client, tests/browser):
#   npm_ci.sh SRC WORK PACKAGE
# copies SRC's package.json and package-lock.json into WORK (a build folder) and runs
# `npm ci` there, pinned by the lock, unless WORK already holds PACKAGE from the same lock.
# Exits 77 (CTest's SKIP_RETURN_CODE) when npm is missing or npm ci fails (no registry):
# callers run it as `bash npm_ci.sh ... || exit $?`.
set -euo pipefail
SRC=$1 WORK=$2 PKG=$3
if ! command -v npm >/dev/null; then
  echo "SKIP: npm not found"; exit 77
fi
mkdir -p "$WORK"
if ! cmp -s "$SRC/package-lock.json" "$WORK/package-lock.json" || [ ! -d "$WORK/node_modules/$PKG" ]; then
  cp "$SRC/package.json" "$SRC/package-lock.json" "$WORK/"
  if ! (cd "$WORK" && npm ci --no-audit --no-fund --loglevel=error); then
    rm -f "$WORK/package-lock.json"
    echo "SKIP: npm ci failed (no access to the npm registry?)"; exit 77
  fi
fi
