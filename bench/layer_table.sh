#!/usr/bin/env bash
# Reproduces the README's whole-layer table (all-MiniLM-L6-v2 fine-tuned on TASK, 6 layers): the pruning run with
# --target-layers N for each N of LAYERS (default "3 2") and each --layer-choice of CHOICES (default "fisher top
# alternate"), one run folder each, RECOVER recovery steps (default 150, as the FLOPs-budget table) distilling from
# the unpruned model. Each row: the layers kept, the metric with the others removed (before recovery) and after
# recovery, the FLOPs kept, the measured speedup at batch 32 and 1 (stage 8, side by side), and the run time.
# Finished runs are kept (summary.json), so a rerun only does what is missing.
# Usage: TASK=sst2 bench/layer_table.sh   (env PRUNE, BASE = fine-tuned model, OUT = runs folder, CONFIG)
set -euo pipefail
TASK="${TASK:-sst2}"
PRUNE="${PRUNE:-build/bin/prune}"
BASE="${BASE:-runs/${TASK}_ft/best}"
OUT="${OUT:-runs/layers/$TASK}"
CONFIG="${CONFIG:-configs/$TASK.yaml}"
RECOVER="${RECOVER:-150}"
[[ -f "$BASE/config.json" ]] || {
  echo "layer_table: $BASE not found; fine-tune first: prune train --config $CONFIG --out ${BASE%/best}" >&2; exit 1; }
LAYERS="${LAYERS:-3 2}"
CHOICES="${CHOICES:-fisher top alternate}"
first_choice() { echo "$CHOICES" | awk '{print $1}'; }
# A choice that keeps the same layers as the first choice's finished run of this N is that run: not run again.
same_layers() {
  local s="$OUT/layers$1-$(first_choice)/summary.json"
  [[ -f "$s" ]] && /usr/bin/python3 -c 'import json, sys; f = json.load(open(sys.argv[1]))["final"]["layers"]["choices"]
sys.exit(0 if f[sys.argv[2]]["kept"] == f[sys.argv[3]]["kept"] else 1)' "$s" "$2" "$(first_choice)"
}
for n in $LAYERS; do
  for c in $CHOICES; do
    dir="$OUT/layers$n-$c"
    [[ -f "$dir/summary.json" ]] && continue
    [[ "$c" != "$(first_choice)" ]] && same_layers "$n" "$c" && continue
    echo "+ $PRUNE --config $CONFIG --model $BASE --criteria taylor --schedule 0,50,100 --target-layers $n --layer-choice $c --recover-steps $RECOVER --out $dir" >&2
    t0=$(date +%s.%N)
    "$PRUNE" --config "$CONFIG" --model "$BASE" --criteria taylor --schedule 0,50,100 --target-layers "$n" \
      --layer-choice "$c" --recover-steps "$RECOVER" --out "$dir"
    awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { print a - b }' > "$dir/wall_seconds"
  done
done

/usr/bin/python3 - "$OUT" "$LAYERS" "$CHOICES" <<'PYEOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
choices = sys.argv[3].split()
def run_of(n, c):  # the folder holding choice c at n layers: its own, or the first choice's when it kept the same
    own = out / f"layers{n}-{c}"
    if (own / "summary.json").exists():
        return own
    first = out / f"layers{n}-{choices[0]}"
    if (first / "summary.json").exists():
        f = json.loads((first / "summary.json").read_text())["final"]["layers"]["choices"]
        if f[c]["kept"] == f[choices[0]]["kept"]:
            return first
    return None
rows = [(n, c) for n in sys.argv[2].split() for c in choices if run_of(n, c)]
if not rows:
    sys.exit("layer_table: no finished run under " + str(out))
first = json.loads((run_of(*rows[0]) / "summary.json").read_text())
m = first["metric"]
unpruned = next(p["mean"] for p in first["criteria"]["taylor"]["curve"] if p["heads_pruned"] == 0)
print(f"{first['task']}: {m} on {first['eval_split']}, unpruned {100 * unpruned:.1f}")
print("| layers kept | choice | which (of 0-5) | FLOPs kept | removed, before recovery | + recovery | batch 32 | batch 1 | run time |")
print("|---|---|---|---|---|---|---|---|---|")
for n, c in sorted(rows, key=lambda r: (-int(r[0]), choices.index(r[1]))):
    run = run_of(n, c)
    s = json.loads((run / "summary.json").read_text())
    fin = s["final"]
    lat = fin["latency"]
    kept = fin["layers"]["choices"][c]["kept"]
    wall = float((run / "wall_seconds").read_text()) / 60
    same = "" if run.name.endswith(c) else f" (= {choices[0]})"
    print(f"| {n}/6 | {c}{same} | {', '.join(map(str, kept))} | {1 / lat['batch32']['flop_bound']:.0%} "
          f"| {100 * fin['metrics_before_recovery'][m]:.1f} | {100 * fin['metrics'][m]:.1f} "
          f"| ×{lat['batch32']['speedup']:.2f} (bound ×{lat['batch32']['flop_bound']:.2f}) | ×{lat['batch1']['speedup']:.2f} "
          f"| {wall:.1f} min |")
PYEOF
