#!/usr/bin/env bash
# The test suite's profile (#43): README command 2's ctest on a build tree, its wall time, and the 20 slowest
# tests with their seconds. Run it on an idle machine (two jobs on 2 cores: every other process slows it).
#   bench/suite_profile.sh [BUILD_DIR] [LOG]     (defaults: build, /tmp/hp_suite.log)
# A fixture's outputs in the build tree (tokenizer references, arch models) are reused when present, as in a
# second run of the suite; remove them first (or use a fresh build tree) for a first run's profile.
set -u
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$REPO/build}"
LOG="${2:-/tmp/hp_suite.log}"
cd "$REPO" || exit 1
t0=$(date +%s)
ctest --test-dir "$BUILD" --output-on-failure -j2 --timeout 3000 > "$LOG" 2>&1
rc=$?
t1=$(date +%s)
echo "suite: exit $rc in $((t1 - t0)) s on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
grep -E "tests passed|tests failed" "$LOG"
echo "the 20 slowest:"
grep -E "Test +#[0-9]+: " "$LOG" \
  | sed -E 's/^.*Test +#[0-9]+: (.*[^ .]) \.+.* ([0-9.]+) sec$/\2\t\1/' | sort -t$'\t' -k1 -rn | head -20 \
  | awk -F'\t' '{printf "%8.1f s  %s\n", $1, $2}'
exit $rc
