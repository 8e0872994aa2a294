#!/usr/bin/env bash
# Reproduces the frontier tables (#41, #58): `prune --max-drop DROP` on a fine-tuned all-MiniLM-L6-v2 (BASE, e.g. README
# command 1's runs/sst2/finetune/best) with the DEFAULTS — the taylor head ranking (prune.frontier_criteria), the search at every budget_schedule
# point recovered by prune.recover_steps and taken at the best of its steps on the selection slice, the gates at the
# cheapest budget the search left within 2·DROP (recovered as long) — timed at batch 32 x 128 tokens. BASE may also be
# the pretrained checkpoints/all-MiniLM-L6-v2: the run then fine-tunes it first (prune.finetune), its time included. TRIM=1 trims the candidates
# (the taylor ranking at 6 head counts, the search at 4 budgets, the gates on 12,800 examples: train.* shapes the
# gates and fine-tuning only, never the recoveries) to keep the run near half an hour on 2 cores. A finished run is
# kept (summary.json); a killed one resumes. Prints the frontier (every point, the selection metric the choice read with its
# difference and 90% interval there, the step each budget candidate is, its cost, the front and the choice) and the run's wall time.
# Usage: bench/frontier_table.sh   (env PRUNE, TASK = sst2, BASE = runs/$TASK/finetune/best, OUT = runs/frontier_$TASK,
#                                   DROP = 1, TRIM = 0, EXTRA = more flags)
set -euo pipefail
PRUNE="${PRUNE:-build/bin/prune}"
TASK="${TASK:-sst2}"
BASE="${BASE:-runs/$TASK/finetune/best}"
OUT="${OUT:-runs/frontier_$TASK}"
DROP="${DROP:-1}"
trim=()
if [[ "${TRIM:-0}" == 1 ]]; then
  trim=(--criteria taylor --schedule 0,25,50,60,70,80 --set "prune.budget_schedule=[100,70,50,40,30]"
        --set train.max_train_examples=12800 --set train.max_steps=0 --set train.epochs=1 --set train.eval_every=100)
fi
read -r -a extra <<< "${EXTRA:-}"
[[ -f "$BASE/config.json" ]] || { echo "frontier_table: $BASE not found; fine-tune first (or set BASE)" >&2; exit 1; }
if [[ ! -f "$OUT/summary.json" ]]; then
  args=(--config "configs/$TASK.yaml" --model "$BASE" --max-drop "$DROP" --set prune.latency_seq=128 "${trim[@]}"
        "${extra[@]}" --out "$OUT")
  echo "+ $PRUNE ${args[*]}" >&2
  t0=$(date +%s.%N)
  rc=0
  "$PRUNE" "${args[@]}" || rc=$?
  # Exit 2 with a summary: no candidate within DROP (the table still shows the frontier).
  [[ $rc -eq 0 || ( $rc -eq 2 && -f "$OUT/summary.json" ) ]] || exit "$rc"
  awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { print a - b }' > "$OUT/wall_seconds"
fi

/usr/bin/python3 - "$OUT" <<'PYEOF'
import csv, json, pathlib, sys
out = pathlib.Path(sys.argv[1])
f = json.loads((out / "summary.json").read_text())["frontier"]
rows = list(csv.DictReader((out / "frontier.csv").open()))  # the run's own Pareto front and choice
b1 = next((k for k in rows[0] if k.startswith("speedup_b1_")), None)
wall = (out / "wall_seconds").read_text().strip() if (out / "wall_seconds").exists() else "nan"
ref = f.get("reference", "unpruned")  # the better of the unpruned fp32 model and the control: what Δ reads
ref_text = (f"unpruned fp32 {f['baseline']:.2f}" if ref == "unpruned" else
            f"{ref} {f['baseline']:.2f} (unpruned fp32 {f.get('unpruned_metric', float('nan')):.2f})")
print(f"{f['task']} {f['split']} {f['metric']}: reference {ref_text}, D = {f['max_drop']:g}; speed-up "
      f"over unpruned fp32 (headprune) at {f['timing']}; ONNX Runtime: {f['onnxruntime']}; run "
      f"{float(wall) / 60:.1f} min\n")
sel_ref = (f"unpruned fp32 {f.get('select_baseline', float('nan')):.2f}" if ref == "unpruned" else
           f"{ref} {f.get('select_baseline', float('nan')):.2f}, unpruned fp32 {f.get('unpruned_select', float('nan')):.2f}")
print(f"choices on {f.get('select_split', '?')} ({sel_ref} there; Δ from the {ref})\n")
print("| candidate | step | precision | heads | FLOPs kept | " + f["metric"] + " | Δ | selection | speed-up | batch 1 | cost | |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in sorted(rows, key=lambda r: -float(r["speedup"])):
    name = " ".join(x for x in (r["method"], r["criterion"], r["budget"]) if x)
    mark = ("**chosen**" if r["chosen"] == "1" else "reference" if r["reference"] == "1" else
            "front" if r["pareto"] == "1" else "")
    one = f"×{float(r[b1]):.2f}" if b1 and r[b1] else "–"
    cost = f"{float(r['cost_s']) / 60:.1f} min" if r.get("cost_s") and float(r["cost_s"]) > 0 else "–"
    sel = f"{float(r['select_metric']):.2f}" if r.get("select_metric") else "–"  # ONNX Runtime: not on the slice
    if r.get("select_delta_lo") and r.get("select_metric"):  # Δ on the slice, 90% paired-bootstrap interval
        d = float(r["select_metric"]) - f["select_baseline"]
        lo, hi = float(r["select_delta_lo"]), float(r["select_delta_hi"])  # equal: no predictions kept, no interval
        sel += f" ({d:+.2f} [{lo:+.2f}, {hi:+.2f}])" if lo < hi else f" ({d:+.2f})"
    print(f"| {name} | {r.get('variant', '')} | {r['precision']} | {r['heads_kept']} | {100 * float(r['flops_kept']):.0f}% | "
          f"{float(r['metric']):.2f} | {round(float(r['metric']) - f['baseline'], 2) + 0.0:+.2f} | "
          f"{sel} | ×{float(r['speedup']):.2f} | {one} | {cost} | {mark} |")
PYEOF
