#!/usr/bin/env bash
# README command 1 on fresh clones of HEAD (#43): clone 1 with an empty ccache and a new Python venv, then clone 2
# with the cache clone 1 left; for each, setup's own step times and the time to prune's first log line (the run
# is stopped there). The apt packages are whatever this machine has. Everything goes under $1 (default
# /tmp/hp_fresh), with ../shared linked beside each clone.
#   bench/fresh_setup.sh [DIR]
set -u
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASE="${1:-/tmp/hp_fresh}"
rm -rf "$BASE"; mkdir -p "$BASE"
export CCACHE_DIR="$BASE/ccache"
for n in 1 2; do
  mkdir -p "$BASE/c$n"; ln -s "$(cd "$REPO/../shared" && pwd)" "$BASE/c$n/shared"
  git clone -q "$REPO" "$BASE/c$n/main"
  cd "$BASE/c$n/main" || exit 1
  t0=$(date +%s.%N)
  HEADPRUNE_CACHE="$BASE/hpcache" HP_PREFIX="$BASE/prefix$n" scripts/setup.sh > "$BASE/setup$n.log" 2>&1; rc=$?
  t1=$(date +%s.%N)
  PATH="$BASE/prefix$n/bin:$PATH" HEADPRUNE_CACHE="$BASE/hpcache" stdbuf -oL prune --config sst2.yaml --target-heads 36 \
    --out "$BASE/run$n" 2>&1 | head -n 1 > "$BASE/first$n.txt"
  t2=$(date +%s.%N)
  echo "clone $n: setup exit $rc in $(echo "$t1 - $t0" | bc) s; first log line $(echo "$t2 - $t1" | bc) s later"
  grep -E "took|done in" "$BASE/setup$n.log"
  ccache -s | sed -n 2,6p
done
