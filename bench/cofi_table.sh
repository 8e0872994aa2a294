#!/usr/bin/env bash
# Reproduces the README's learned-gates rows (CoFi's gates on heads, FFN neurons and sublayers under a FLOPs
# target; SST-2, all-MiniLM-L6-v2 fine-tuned by README command 1): the pruning run with --method gates at each
# of FLOPS (default "0.5 0.3"), one run folder each. The gated run trains on the first 12,800 training examples:
# one epoch (400 steps) with the gates and the Lagrangian, then one epoch with the structure fixed, distilling the
# logits of the unpruned model (prune.recover_distill; GATES_FLAGS adds flags, e.g. "--set gates.distill_hidden=1"). Beside it, in the same run, the retraining-free
# search at the same budget (its curve point at the target, tuned; and that choice after prune.curve_recover_steps
# = RECOVER steps of recovery, default 150, the budget table's recipe). Finished runs are kept (summary.json).
# Prints one row per run: FLOPs kept, heads, FFN neurons, the gated model's dev accuracy, the retraining-free
# search (+ tuning) and + recovery at the same budget, the measured speedups, the gated training's time, the wall time.
# Usage: bench/cofi_table.sh   (env PRUNE, BASE = fine-tuned model, OUT = runs folder, FLOPS, GATES_FLAGS, RECOVER)
set -euo pipefail
PRUNE="${PRUNE:-build/bin/prune}"
BASE="${BASE:-runs/sst2/finetune/best}"
OUT="${OUT:-runs/cofi}"
FLOPS="${FLOPS:-0.5 0.3}"
RECOVER="${RECOVER:-150}"
read -r -a gates_flags <<< "${GATES_FLAGS:-}"
[[ -f "$BASE/config.json" ]] || { echo "cofi_table: $BASE not found; run README command 1 first (or set BASE)" >&2; exit 1; }
for f in $FLOPS; do
  dir="$OUT/flops$f"
  [[ -f "$dir/summary.json" ]] && continue
  pct=$(awk -v f="$f" 'BEGIN { printf "%d", f * 100 + 0.5 }')
  args=(--config configs/sst2.yaml --model "$BASE" --criteria taylor --schedule 0,50,100 --target-flops "$f"
        --method gates --set "prune.budget_schedule=[100,$pct]" --set "prune.curve_recover_steps=$RECOVER"
        --set train.max_train_examples=12800 --set train.max_steps=0 --set train.epochs=1 --set train.eval_every=100
        "${gates_flags[@]}" --out "$dir")
  echo "+ $PRUNE ${args[*]}" >&2
  t0=$(date +%s.%N)
  "$PRUNE" "${args[@]}"
  awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { print a - b }' > "$dir/wall_seconds"
done

/usr/bin/python3 - "$OUT" "$FLOPS" <<'PYEOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
summaries = {f: json.loads((out / f"flops{f}" / "summary.json").read_text()) for f in sys.argv[2].split()}
# A column of hidden channels kept when a run's gates closed some (--structures ...,hidden).
hidden = any(s["final"]["budget"].get("hidden_total", 0) > 0 for s in summaries.values())
print("| FLOPs kept (target → kept) | heads | FFN neurons |" + (" hidden channels |" if hidden else "") +
      " gates (CoFi) | retraining-free: search + tuning |"
      " + recovery | batch 32 | batch 1 | gated training | run time |")
print("|---|---|---|---|---|---|---|---|---|---|" + ("---|" if hidden else ""))
for f in sys.argv[2].split():
    d = out / f"flops{f}"
    s = summaries[f]
    fin, b, m = s["final"], s["final"]["budget"], s["metric"]
    target = float(f)
    near = lambda p: abs(p["kept_fraction"] - target) < 0.005
    pts = {p["method"]: p for p in s["budget_curves"]["points"] if near(p)}
    tuned = pts.get("kwon-tuned", {}).get("mean")
    rec = pts.get("kwon-recovered", {}).get("mean")
    lat = fin["latency"]
    wall = float((d / "wall_seconds").read_text()) / 60
    cell = lambda v: f"{100 * v:.1f}" if v is not None else "—"
    channels = (f"| {b['hidden_kept']}/{b['hidden_total']} " if b.get("hidden_total", 0) else "| all ") if hidden else ""
    print(f"| {target:.0%} → {b['kept']:.1%} | {fin['heads_kept']}/{s['heads_total']} | {b['neurons_kept']}/{b['neurons_total']} "
          + channels + f"| {100 * fin['metrics'][m]:.1f} | {cell(tuned)} | {cell(rec)} "
          f"| ×{lat['batch32']['speedup']:.2f} (bound ×{lat['batch32']['flop_bound']:.2f}) | ×{lat['batch1']['speedup']:.2f} "
          f"| {b['seconds']['gates'] / 60:.1f} min | {wall:.1f} min |")
PYEOF
