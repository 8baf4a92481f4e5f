#!/usr/bin/env bash
# The playground's browser test, by hand: installs Debian's chromium and playwright-core
# (npm, pinned by package-lock.json) when they are missing, builds sift, runs the test.
# The screenshot lands in build/tests/browser-artifacts/playground.png. Once node_modules
# exists, CTest also registers it (server_browser) at the next configure.
set -euo pipefail
cd "$(dirname "$0")/../.."
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! command -v chromium >/dev/null; then
  $SUDO apt-get update
  $SUDO DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
fi
[ -d tests/browser/node_modules/playwright-core ] || npm ci --prefix tests/browser --no-audit --no-fund
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" --target sift
exec node tests/browser/playground.test.mjs --sift build/sift --model ../shared/models/stories260K.gguf \
     --chromium "$(command -v chromium)" --out build/tests/browser-artifacts
