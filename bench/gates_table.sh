#!/usr/bin/env bash
# Reproduces the README's head-gates table (SST-2, all-MiniLM-L6-v2): eight `prune train` runs from the
# model that README command 1 fine-tuned, 200 gate steps of 32 examples each; in target mode, then one
# epoch over the same first 6,400 training examples (200 steps) with the heads fixed. Finished runs are
# kept (their train_result.json), so a rerun only does what is missing. About 35 min on 2 cores.
# Usage: bench/gates_table.sh            (env PRUNE, BASE = starting model, OUT = runs folder)
set -euo pipefail
PRUNE="${PRUNE:-build/bin/prune}"
BASE="${BASE:-runs/sst2/finetune/best}"
OUT="${OUT:-runs/gates}"
[[ -f "$BASE/config.json" ]] || { echo "gates_table: $BASE not found; run README command 1 first (or set BASE)" >&2; exit 1; }
common=(--config configs/sst2.yaml --model "$BASE" --max-steps 200 --max-train-examples 6400)

run() {  # run NAME FLAGS...: one `prune train`, its wall time in NAME/wall_seconds
  local name="$1"; shift
  [[ -f "$OUT/$name/train_result.json" ]] && return 0
  echo "+ $PRUNE train ${common[*]} $* --out $OUT/$name" >&2
  local t0; t0=$(date +%s.%N)
  "$PRUNE" train "${common[@]}" "$@" --out "$OUT/$name"
  awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { print a - b }' > "$OUT/$name/wall_seconds"
}

run target36_distill --target-heads 36 --distill
run target36 --target-heads 36
run target18_distill --target-heads 18 --distill
run target18 --target-heads 18
for lambda in 0.0005 0.002 0.01 0.05; do run "l0_$lambda" --gates --lambda "$lambda"; done

/usr/bin/python3 - "$OUT" <<'PYEOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
print("| run | heads open | dev accuracy with those heads | wall time |\n|---|---|---|---|")
for d in sorted(out.iterdir()):
    r = json.loads((d / "train_result.json").read_text())
    wall = float((d / "wall_seconds").read_text())
    # final_metrics: best/ re-evaluated with only the heads it keeps (the deterministic mask)
    print(f"| {d.name} | {r['heads_kept']} of {r['heads_total']} | {100 * r['final_metrics'][r['metric']]:.1f}% | {wall / 60:.1f} min |")
PYEOF
