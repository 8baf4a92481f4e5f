#!/usr/bin/env bash
# The Python package as a user installs it (docs/python.md): a virtual environment over
# Debian's own interpreter and packages (/usr/bin/python3 -m venv --system-site-packages:
# python3-numpy, -cffi, -pytest come from scripts/deps; Debian marks its system Python
# externally managed, so pip installs into a venv), then `pip install --no-build-isolation
# --no-index` of the tree's python/ folder, offline; then its pytest suite against that
# installed copy with SIFT_LIBRARY naming the build's libsift.so.
#   python_test.sh SOURCE_DIR LIBSIFT_SO SIFT_CLI WORK_DIR
set -euo pipefail
src=$1 lib=$2 cli=$3 work=$4
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
rm -rf "$work"; mkdir -p "$work"
cp -r "$src/python" "$work/src" # pip builds in the source folder; keep the checkout clean
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
py=$work/venv/bin/python
"$py" -m pip install --quiet --no-build-isolation --no-index "$work/src"
cd "$work" # not the checkout: `import sift` must find the installed copy
SIFT_LIBRARY="$lib" SIFT_CLI="$cli" "$py" -m pytest -q -p no:cacheprovider "$src/python/tests"
