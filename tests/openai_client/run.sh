#!/usr/bin/env bash
# The openai-client test (CTest: server_openai_client, label npm):
#   run.sh SIFT MODEL TEMPLATE WORKDIR
# installs the official `openai` npm client, pinned by package-lock.json, with `npm ci` into
# WORKDIR (the build folder; again only when the lock changed), copies the test beside it and
# runs it against `sift serve -m MODEL --chat-template-file TEMPLATE`. Exits 77 (CTest's
# SKIP_RETURN_CODE) when node or npm is missing, or npm ci cannot reach the registry.
set -euo pipefail
SIFT=$1 MODEL=$2 TEMPLATE=$3 WORK=$4
HERE="$(cd "$(dirname "$0")" && pwd)"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node or npm not found (the openai client test needs both)"; exit 77
fi
bash "$HERE/../npm_ci.sh" "$HERE" "$WORK" openai || exit $?
cp "$HERE/openai.test.mjs" "$WORK/"
exec node "$WORK/openai.test.mjs" --sift "$SIFT" --model "$MODEL" --template "$TEMPLATE"
