#!/usr/bin/env bash
# Installs sift into a fresh prefix and builds examples/ out of the tree against it, every
# way a user would: pkg-config (sift.pc dynamic, `--static`, sift-static.pc), CMake's
# find_package(sift) (sift::sift and sift::sift_static), and the README's C example as
# printed. Each program must run from anywhere with no LD_LIBRARY_PATH, and the static
# ones must not need libsift.so at all.
#   install_examples.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
unset LD_LIBRARY_PATH
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
fail() { echo "FAIL: $*" >&2; exit 1; }
# run NAME LINKAGE: runs the program from another folder; LINKAGE is dynamic or static
run() {
  local exe=$1 how=$2 out
  out=$(cd / && "$exe") || fail "$exe exited $?"
  grep -q "step 7: token" <<<"$out" || fail "$exe printed: $out"
  local libs; libs=$(ldd "$exe") # (not piped into grep -q: an early exit is SIGPIPE under pipefail)
  if [ "$how" = dynamic ]; then
    grep -q "libsift.so.0 => $prefix/" <<<"$libs" || fail "$exe does not load $prefix's libsift.so: $libs"
  else
    ! grep -q libsift <<<"$libs" || fail "$exe needs libsift.so: $libs"
  fi
  echo "ok: $(basename "$exe") ($how)"
}
cc=${CC:-cc}
flags=(-std=c11 -Wall -Wextra -Werror)
$cc "${flags[@]}" "$src/examples/chain.c" $(pkg-config --cflags --libs sift) -o "$work/pc_dynamic"
run "$work/pc_dynamic" dynamic
# the README's command, word for word
$cc "$src/examples/chain.c" $(pkg-config --cflags --libs --static sift) -o "$work/pc_readme"
run "$work/pc_readme" dynamic
$cc "${flags[@]}" "$src/examples/chain.c" $(pkg-config --cflags --libs --static sift-static) -o "$work/pc_static"
run "$work/pc_static" static

cmake -S "$src/examples" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >/dev/null
cmake --build "$work/cmake" >/dev/null
run "$work/cmake/example_chain" dynamic
run "$work/cmake/example_chain_static" static

# The README's first C block compiles and runs as printed.
awk '/^```c$/{n++; if (n==1) {on=1; next}} /^```$/{on=0} on' "$src/README.md" >"$work/readme.c"
[ -s "$work/readme.c" ] || fail "no C block in README.md"
$cc "${flags[@]}" "$work/readme.c" $(pkg-config --cflags --libs sift) -o "$work/readme"
run "$work/readme" dynamic

# The headers: sift.h alone, and sift-cuda.h where CUDA was built.
[ -f "$prefix/include/sift.h" ] || fail "sift.h not installed"
if [ -f "$build/src/gpu/libsift_cuda.a" ]; then
  [ -f "$prefix/include/sift-cuda.h" ] || fail "sift-cuda.h not installed though CUDA was built"
  echo "ok: sift-cuda.h installed"
fi
echo "install_examples: all passed"
