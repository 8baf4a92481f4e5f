#!/usr/bin/env bash
# The Python package as a user installs it: `pip install --no-build-isolation --no-index
# ./python` with Debian's own interpreter (offline, from the tree), into a fresh folder,
# then its pytest suite against that copy with SIFT_LIBRARY naming the build's libsift.so.
#   python_test.sh SOURCE_DIR LIBSIFT_SO SIFT_CLI WORK_DIR
set -euo pipefail
src=$1 lib=$2 cli=$3 work=$4
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
py=/usr/bin/python3 # Debian's: python3-numpy, -cffi, -pytest, -pip come from scripts/deps
rm -rf "$work"; mkdir -p "$work"
cp -r "$src/python" "$work/src" # pip builds in the source folder; keep the checkout clean
"$py" -m pip install --quiet --no-build-isolation --no-index --no-deps --target "$work/site" "$work/src"
cd "$work" # not the checkout: `import sift` must find the installed copy
PYTHONPATH="$work/site" SIFT_LIBRARY="$lib" SIFT_CLI="$cli" SIFT_SOURCE_ROOT="$src" \
  "$py" -m pytest -q -p no:cacheprovider "$src/python/tests"
