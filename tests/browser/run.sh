#!/usr/bin/env bash
# The playground's browser test (CTest: server_browser, labels server;browser;npm):
#   run.sh SIFT MODEL WORKDIR
# installs playwright-core, pinned by package-lock.json, with `npm ci` into WORKDIR (the
# build folder; again only when the lock changed), copies the test beside it and runs it
# against SIFT with Debian's chromium (scripts/deps installs it; $SIFT_CHROMIUM names
# another). The screenshots land in WORKDIR/artifacts. Exits 77 (CTest's SKIP_RETURN_CODE)
# when node, npm or chromium is missing, or npm ci cannot reach the registry.
#   run.sh                  by hand: installs chromium with apt-get when missing, builds sift
#                           in build/ and runs the test (artifacts in build/tests/browser/artifacts)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ $# -eq 0 ]; then
  cd "$HERE/../.."
  if ! command -v chromium >/dev/null; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
  fi
  cmake -S . -B build >/dev/null
  cmake --build build -j "$(nproc)" --target sift
  exec bash "$HERE/run.sh" "$PWD/build/sift" "$(cd .. && pwd)/shared/models/stories260K.gguf" "$PWD/build/tests/browser"
fi
SIFT=$1 MODEL=$2 WORK=$3
CHROMIUM=${SIFT_CHROMIUM:-$(command -v chromium || true)}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node or npm not found (the browser test needs both)"; exit 77
fi
if [ -z "$CHROMIUM" ] || [ ! -x "$CHROMIUM" ]; then
  echo "SKIP: chromium not found (scripts/deps installs Debian's)"; exit 77
fi
bash "$HERE/../npm_ci.sh" "$HERE" "$WORK" playwright-core || exit $?
cp "$HERE/playground.test.mjs" "$WORK/"
exec node "$WORK/playground.test.mjs" --sift "$SIFT" --model "$MODEL" --chromium "$CHROMIUM" --out "$WORK/artifacts"
