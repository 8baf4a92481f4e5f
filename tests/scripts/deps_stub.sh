#!/usr/bin/env bash
# scripts/deps's install branch, which CI never reaches on its own (its packages are
# already installed): run it with stand-ins for dpkg-query, apt-get, sudo and id first on
# the PATH, as on a bare machine, and check what it would run.
#   1. root, nothing installed: `dpkg --add-architecture arm64` (the aarch64 pass's arm64
#      libraries), `apt-get update`, then `apt-get install -y` of every package with
#      DEBIAN_FRONTEND=noninteractive in apt-get's environment, no sudo
#   2. a user, nothing installed: the same through sudo
#   3. everything installed: no apt-get at all
#   4. a half-installed package counts as missing
#   deps_stub.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1 work=$2
rm -rf "$work"; mkdir -p "$work/bin"
log=$work/log
fail() { echo "FAIL: $*" >&2; echo "--- log:" >&2; cat "$log" >&2 || true; exit 1; }
stub() { printf '#!/usr/bin/env bash\n%s\n' "$2" >"$work/bin/$1"; chmod +x "$work/bin/$1"; }
# dpkg-query -W -f=... PKG: "installed" for the packages listed in $work/installed
stub dpkg-query 'p=${!#}; if grep -qx -- "$p" "'"$work"'/installed" 2>/dev/null; then printf "install ok installed"
elif grep -qx -- "$p" "'"$work"'/half" 2>/dev/null; then printf "install ok half-installed"
else echo "dpkg-query: no packages found matching $p" >&2; exit 1; fi'
stub apt-get 'echo "apt-get DEBIAN_FRONTEND=${DEBIAN_FRONTEND:-unset} $*" >>"'"$log"'"'
# dpkg: no foreign architecture yet (a bare machine); anything else is logged
stub dpkg '[ "$1" = --print-foreign-architectures ] && exit 0; echo "dpkg $*" >>"'"$log"'"'
stub sudo 'echo "sudo" >>"'"$log"'"; exec "$@"'
stub id 'if [ "$1" = -u ]; then echo "${STUB_UID:-0}"; else /usr/bin/id "$@"; fi'
mapfile -t pkgs < <(bash "$src/scripts/deps" --list)
((${#pkgs[@]} > 5)) || fail "scripts/deps --list printed ${#pkgs[@]} packages"
for p in python3-numpy python3-pytest python3-cffi cmake libcmocka-dev gcc-aarch64-linux-gnu qemu-user libpcre2-dev:arm64 chromium; do
  # (a here-string, not a pipe: grep -q quits at the first match, and with pipefail the
  # printf it cut off would fail the check now and then)
  grep -qx -- "$p" <<<"$(printf '%s\n' "${pkgs[@]}")" || fail "$p is not in scripts/deps"
done
deps() { : >"$log"; env -u DEBIAN_FRONTEND PATH="$work/bin:$PATH" STUB_UID="$1" bash "$src/scripts/deps" >/dev/null 2>&1 \
  || fail "scripts/deps exited $? (uid $1)"; }

# 1. root on a bare machine
deps 0
expect="dpkg --add-architecture arm64
apt-get DEBIAN_FRONTEND=unset update
apt-get DEBIAN_FRONTEND=noninteractive install -y ${pkgs[*]}"
[ "$(cat "$log")" = "$expect" ] || fail "as root, expected:
$expect"
echo "ok: root, bare: dpkg --add-architecture arm64, apt-get update + install -y of ${#pkgs[@]} packages, noninteractive, no sudo"

# 2. a user on a bare machine
deps 1000
[ "$(grep -c '^sudo$' "$log")" = 3 ] || fail "as a user, expected dpkg and apt-get twice through sudo"
grep -q "^apt-get DEBIAN_FRONTEND=noninteractive install -y ${pkgs[*]}\$" "$log" || fail "as a user, no install line"
echo "ok: user, bare: dpkg and both apt-get runs through sudo"

# 3. everything installed
printf '%s\n' "${pkgs[@]}" >"$work/installed"
deps 0
[ ! -s "$log" ] || fail "with everything installed, expected no apt-get"
echo "ok: all installed: no apt-get"

# 4. one half-installed, one absent
grep -vx -e cmake -e python3-cffi "$work/installed" >"$work/installed.new"; mv "$work/installed.new" "$work/installed"
echo cmake >"$work/half"
deps 0
grep -q "^apt-get DEBIAN_FRONTEND=noninteractive install -y cmake python3-cffi\$" "$log" || fail "expected cmake and python3-cffi only"
echo "ok: half-installed + absent: installs exactly those two"
