#!/usr/bin/env bash
# docs/python.md's install, as a new user runs it: a fresh copy of the checkout (its tracked
# files and the new ones git does not ignore; no build folder) with the shared folder beside it,
# then the two commands between the doc's two-commands markers, run as written (HOME is a
# scratch folder, so ~/sift-venv is too; no SIFT_LIBRARY, no LD_LIBRARY_PATH). Then `import sift`
# must work and load the libsift.so the install copied into the package, and sample and
# tokenize with it. Last, a copy of the package installed where no library is: its import error
# names the command to run, and once the checkout's build/libsift.so is back it loads that.
#   python_two_commands.sh SOURCE_DIR SHARED_DIR WORK_DIR
# The first command is `bash scripts/run`, a whole build (about 4 minutes on 2 cores). So that
# a second run takes seconds, the copy's build folder alone is kept between runs (the copy is
# made again around it; the files keep their times, so make recompiles what changed), and its
# sift and libsift.so are deleted first: scripts/run must link them itself.
set -euo pipefail
src=$(cd "$1" && pwd) shared=$(cd "$2" && pwd) work=$3
mkdir -p "$work"
work=$(cd "$work" && pwd)
clone=$work/sift
[ -d "$clone/build" ] && mv "$clone/build" "$work/build.kept"
rm -rf "$clone" "$work/home" "$work/nolib" "$work"/*.log "$work/shared"
mkdir -p "$clone" "$work/home"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$src" ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$src/$f" ] && printf '%s\0' "$f"; done |
    tar -C "$src" --null -T - -cf - | tar -C "$clone" -xf -
else
  (cd "$src" && tar --exclude='./build*' -cf - .) | tar -C "$clone" -xf -
fi
ln -s "$shared" "$work/shared" # scripts/run reads ../shared/models
if [ -d "$work/build.kept" ]; then
  mv "$work/build.kept" "$clone/build"
  rm -f "$clone/build/sift" "$clone/build"/libsift.so*
fi

cmds=$(awk '/<!-- two-commands:begin -->/{f=1; next} /<!-- two-commands:end -->/{f=0} f && !/^```/ && NF' "$clone/docs/python.md")
n=$(printf '%s\n' "$cmds" | grep -c .)
[ "$n" -eq 2 ] || { echo "docs/python.md: $n commands between the two-commands markers, not 2:"; printf '%s\n' "$cmds"; exit 1; }
[ "$(printf '%s\n' "$cmds" | head -1)" = "bash scripts/run" ] || { echo "docs/python.md: the first command is not bash scripts/run"; exit 1; }

export HOME=$work/home PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
unset SIFT_LIBRARY LD_LIBRARY_PATH PYTHONPATH
i=0
while IFS= read -r cmd; do
  i=$((i + 1))
  echo "== $i: $cmd"
  t0=$(date +%s)
  (cd "$clone" && bash -c "$cmd") >"$work/cmd$i.log" 2>&1 || { echo "command $i failed:"; tail -30 "$work/cmd$i.log"; exit 1; }
  echo "   ok ($(($(date +%s) - t0)) s)"
done <<<"$cmds"
grep -q "Once upon a time" "$work/cmd1.log" || { echo "scripts/run wrote no story"; tail -5 "$work/cmd1.log"; exit 1; }

check='
import os, sys, sift
lib = [l.split()[-1] for l in open("/proc/self/maps") if "libsift" in l][0]
print("   import sift: libsift", sift.library_version(), "from", lib)
assert lib.startswith(os.path.dirname(sift.__file__)), lib  # the copy inside the package
chain = sift.Chain.from_spec("top_k(1);dist(1)")
assert chain.sample([0.1, 0.9, 0.2]) == 1
v = sift.Vocab(sys.argv[1])
ids = v.tokenize("Once upon a time")
assert ids[0] == v.bos and v.detokenize(ids[1:]) == "Once upon a time", ids
'
(cd "$work" && "$HOME/sift-venv/bin/python" -c "$check" "$shared/models/stories260K.gguf")

# the package where no library is: the error says what to run; a later build is found
mv "$clone/build" "$clone/build.off"
"$HOME/sift-venv/bin/pip" install --quiet --no-build-isolation --no-index --no-deps --target "$work/nolib" "$clone/python"
[ ! -e "$work/nolib/sift/libsift.so" ] || { echo "a library was copied though none was built"; exit 1; }
if (cd "$work" && PYTHONPATH=$work/nolib "$HOME/sift-venv/bin/python" -c "import sift" 2>"$work/nolib.err"); then
  echo "   (a libsift.so.0 on the system path: the missing-library message is not checked)"
else
  grep -q "cannot find libsift.so: build it: \`bash scripts/run\` in $clone" "$work/nolib.err" ||
    { echo "the import error does not say what to run:"; tail -3 "$work/nolib.err"; exit 1; }
  echo "   without a library: $(tail -1 "$work/nolib.err" | cut -c1-110)..."
fi
mv "$clone/build.off" "$clone/build"
(cd "$work" && PYTHONPATH=$work/nolib "$HOME/sift-venv/bin/python" -c "
import sift
lib = [l.split()[-1] for l in open('/proc/self/maps') if 'libsift' in l][0]
assert lib == '$clone/build/libsift.so.0.1.0' or lib.startswith('$clone/build/'), lib
print('   built after the install: loaded', lib)")
rm -rf "$work/home" "$work/nolib" # (the venv; the copy's build folder stays for the next run)
echo "python_two_commands: ok"
