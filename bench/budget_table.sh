#!/usr/bin/env bash
# Reproduces the README's FLOPs-budget tables (all-MiniLM-L6-v2 fine-tuned on TASK: sst2, mrpc or stsb): the
# pruning run with --target-flops 0.7, 0.6, 0.5 and 0.4 from the fine-tuned model, one run folder each (the 0.5
# run draws the whole budget curves; the others only their target); then, for SST-2, the latency row,
# --target-latency $LATENCY ms (default 70, about half of the unpruned model's 135-148 ms at batch 32 x 64 on the
# 2-core machine), with its whole curves against measured latency. Each row: the metric after the search, after
# rearrangement, after mask tuning (retraining-free) and after recovery, the FLOPs kept, the measured speedup
# at batch 32 and 1, and each step's seconds. The curves' recovered line (prune.curve_recover_steps) is off
# here, CURVE_RECOVER=-1 turns it on for the 0.5 run (a recovery per budget point: 8 x the recovery time).
# Finished runs are kept (summary.json), so a rerun only does what is missing.
# Below the table, the 0.5 run's curves at every budget point (retraining-free steps, and recovery when on).
# FLOPS picks the runs (default "0.5 0.7 0.6 0.4"; without 0.5, only their rows are printed), CURVES the 0.5 run's
# prune.budget_schedule (default the config's 100 ... 30; on MRPC each point takes ~3.5 min here, most of it mask
# tuning at 128 tokens).
# STRUCTURES names what the search may remove (--structures; default the config's heads,neurons): with hidden or
# layers, a column of the hidden channels or whole layers kept.
# Usage: TASK=mrpc bench/budget_table.sh   (env PRUNE, BASE = fine-tuned model, OUT = runs folder, CONFIG)
set -euo pipefail
TASK="${TASK:-sst2}"
PRUNE="${PRUNE:-build/bin/prune}"
BASE="${BASE:-runs/${TASK}_ft/best}"
OUT="${OUT:-runs/budget/$TASK}"
CONFIG="${CONFIG:-configs/$TASK.yaml}"
[[ -f "$BASE/config.json" ]] || {
  echo "budget_table: $BASE not found; fine-tune first: prune train --config $CONFIG --out ${BASE%/best}" >&2; exit 1; }
FLOPS="${FLOPS:-0.5 0.7 0.6 0.4}"
for f in $FLOPS; do
  dir="$OUT/flops$f"
  [[ -f "$dir/summary.json" ]] && continue
  extra=(--set "prune.curve_recover_steps=${CURVE_RECOVER:-0}")
  [[ -n "${CURVES:-}" ]] && extra+=(--set "prune.budget_schedule=$CURVES")
  [[ -n "${STRUCTURES:-}" ]] && extra+=(--structures "$STRUCTURES")
  [[ "$f" == 0.5 ]] || extra=(--set "prune.budget_schedule=[100]" --set prune.curve_recover_steps=0
                              ${STRUCTURES:+--structures "$STRUCTURES"})
  echo "+ $PRUNE --config $CONFIG --model $BASE --criteria taylor --schedule 0,50,100 --target-flops $f ${extra[*]} --out $dir" >&2
  t0=$(date +%s.%N)
  "$PRUNE" --config "$CONFIG" --model "$BASE" --criteria taylor --schedule 0,50,100 --target-flops "$f" "${extra[@]}" \
    --out "$dir"
  awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { print a - b }' > "$dir/wall_seconds"
done
LATENCY="${LATENCY:-$([[ $TASK == sst2 ]] && echo 70 || echo 0)}"
dir="$OUT/latency$LATENCY"
if [[ $LATENCY != 0 && ! -f "$dir/summary.json" ]]; then
  echo "+ $PRUNE --config $CONFIG --model $BASE --criteria taylor --schedule 0,50,100 --target-latency $LATENCY --out $dir" >&2
  t0=$(date +%s.%N)
  "$PRUNE" --config "$CONFIG" --model "$BASE" --criteria taylor --schedule 0,50,100 --target-latency "$LATENCY" \
    --set prune.curve_recover_steps=0 --out "$dir"
  awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { print a - b }' > "$dir/wall_seconds"
fi

/usr/bin/python3 - "$OUT" "$LATENCY" "$FLOPS" <<'PYEOF'
import json, os, sys, pathlib
out = pathlib.Path(sys.argv[1])
runs = [f for f in ("0.7", "0.6", "0.5", "0.4", "0.3") if f in sys.argv[3].split()]
summaries = {f: json.loads((out / f"flops{f}" / "summary.json").read_text()) for f in runs}
s0 = summaries.get("0.5")
first = next(iter(summaries.values()))
# The unpruned model: any curve's point at 100% of the FLOPs kept (a run with budget_schedule [100] has no
# heads-only curve, only that point of each budget method).
unpruned = next(p["mean"] for p in first["budget_curves"]["points"]
                if p["heads_kept"] == first["heads_total"] and p.get("kept_fraction", 1) >= 1 - 1e-9)
print(f"{first['task']}: {first['metric']} on {first['eval_split']}, unpruned {100 * unpruned:.1f}")
# A column for the hidden channels and one for the layers kept, when the search may remove them.
coarse = [k for k in ("hidden", "layers") if k in os.environ.get("STRUCTURES", "") or any(
    s["final"]["budget"].get(k + "_total", 0) > 0 for s in summaries.values())]
print("| FLOPs kept (target → kept) | heads | FFN neurons |" + "".join(f" {k} |" for k in coarse) +
      " search | + rearrangement | + mask tuning | + recovery |"
      " batch 32 | batch 1 | search time (gradients + search + rearrangement + tuning) | run time |")
print("|---|---|---|---|---|---|---|---|---|---|---|" + "---|" * len(coarse))
for f in runs:
    s = summaries[f]
    fin, b, m = s["final"], s["final"]["budget"], s["metric"]
    step = {k: 100 * v[m] for k, v in b["metrics_by_step"].items()}
    lat = fin["latency"]
    sec = b["seconds"]
    search_s = sum(sec.get(k, 0) for k in ("gradients", "search", "rearrange", "tuning"))
    wall = float((out / f"flops{f}" / "wall_seconds").read_text()) / 60
    kept = "".join(f"| {b[k + '_kept']}/{b[k + '_total']} " if b.get(k + "_total", 0) else "| all " for k in coarse)
    print(f"| {float(f):.0%} → {b['kept']:.1%} | {fin['heads_kept']}/{s['heads_total']} | {b['neurons_kept']}/{b['neurons_total']} "
          + kept + f"| {step['search']:.1f} | {step['rearranged']:.1f} | {step['tuned']:.1f} | {100 * fin['metrics'][m]:.1f} "
          f"| ×{lat['batch32']['speedup']:.2f} (bound ×{lat['batch32']['flop_bound']:.2f}) | ×{lat['batch1']['speedup']:.2f} "
          f"| {search_s:.0f} s ({sec.get('gradients', 0):.0f} + {sec['search']:.1f} + {sec['rearrange']:.1f} + {sec['tuning']:.0f}) "
          f"| {wall:.1f} min |")

if s0 is None:  # FLOPS without 0.5: its rows only
    sys.exit(0)
print()
print("The 0.5 run's budget curves (" + s0["metric"] + ", the choice at each point, units physically removed):")
methods = [m for m in ("kwon-search", "kwon-rearranged", "kwon-tuned", "kwon-recovered", "taylor-search",
                       "magnitude-search", "random-search") if any(p["method"] == m for p in s0["budget_curves"]["points"])]
print("| FLOPs kept | heads | " + " | ".join(methods) + " |")
print("|---|---|" + "---|" * len(methods))
by = {(round(p["kept_fraction"], 3), p["method"]): p for p in s0["budget_curves"]["points"]}
for kept in sorted({k for k, m in by if m == "kwon-search"}, reverse=True):
    row = [f"{100 * by[(kept, m)]['mean']:.1f}" if (kept, m) in by else "" for m in methods]
    print(f"| {100 * kept:.1f}% | {by[(kept, 'kwon-search')]['heads_kept']} | " + " | ".join(row) + " |")
if sys.argv[2] == "0":
    sys.exit(0)
s = json.loads((out / f"latency{sys.argv[2]}" / "summary.json").read_text())
fin, b, m = s["final"], s["final"]["budget"], s["metric"]
lat, step, sec = b["latency"], {k: 100 * v[m] for k, v in b["metrics_by_step"].items()}, b["seconds"]
print()
print(f"| latency target (batch {lat['batch']:.0f} x {lat['seq']:.0f}) | predicted | measured | heads | FFN neurons | search "
      "| + rearrangement | + mask tuning | + recovery | batch 32 | batch 1 | table + search time |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
table = json.loads((out / f"latency{sys.argv[2]}" / "latency_table.json").read_text())
search_s = sum(sec.get(k, 0) for k in ("gradients", "search", "rearrange", "tuning"))
print(f"| {lat['target']:.0f} ms ({b['target']:.0%} of {table['unpruned_ms']:.0f} ms) | {lat['predicted']:.1f} ms "
      f"| {lat['measured']:.1f} ms | {fin['heads_kept']}/{s['heads_total']} | {b['neurons_kept']}/{b['neurons_total']} "
      f"| {step['search']:.1f} | {step['rearranged']:.1f} | {step['tuned']:.1f} | {100 * fin['metrics'][m]:.1f} "
      f"| ×{fin['latency']['batch32']['speedup']:.2f} (bound ×{fin['latency']['batch32']['flop_bound']:.2f}) "
      f"| ×{fin['latency']['batch1']['speedup']:.2f} | {table['seconds']:.0f} + {search_s:.0f} s |")
PYEOF
