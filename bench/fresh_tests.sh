#!/usr/bin/env bash
# README command 2 on a fresh clone of HEAD (#43): `scripts/setup.sh --tests` with an empty ccache and a new Python
# venv, then the README's ctest command (bench/suite_profile.sh: its wall time and the 20 slowest tests). The apt
# packages are whatever this machine has. Everything goes under $1 (default /tmp/hp_fresh_tests), with ../shared
# linked beside the clone. Run it on an idle machine.
#   bench/fresh_tests.sh [DIR]
set -u
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASE="${1:-/tmp/hp_fresh_tests}"
rm -rf "$BASE"; mkdir -p "$BASE/c"
export CCACHE_DIR="$BASE/ccache" HEADPRUNE_CACHE="$BASE/hpcache"
ln -s "$(cd "$REPO/../shared" && pwd)" "$BASE/c/shared"
git clone -q "$REPO" "$BASE/c/main"
cd "$BASE/c/main" || exit 1
echo "commit $(git rev-parse --short HEAD); $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
t0=$(date +%s)
HP_PREFIX="$BASE/prefix" scripts/setup.sh --tests > "$BASE/setup.log" 2>&1; rc=$?
t1=$(date +%s)
echo "setup --tests: exit $rc in $((t1 - t0)) s"
grep -E "took|done in" "$BASE/setup.log"
((rc == 0)) || exit "$rc"
bench/suite_profile.sh build "$BASE/ctest.log"; rc=$?
t2=$(date +%s)
echo "README command 2 in all: $((t2 - t0)) s (setup $((t1 - t0)) s, ctest $((t2 - t1)) s)"
exit $rc
