#!/usr/bin/env bash
# The README's calibration table: for each N, int8 logits of the dev set against fp32 (RMS difference) and the
# dev metric, through `prune infer` (run.calibrate = N; 0 = dynamic).
# Usage: bench/int8_calibration_sweep.sh TASK MODEL [N ...]     e.g. mrpc runs/mrpc_ft/best 0 128 256 512 1024
# Env: PRUNE (default build/bin/prune), PY (default ~/.cache/headprune/venv/bin/python), HEADPRUNE_DATA.
set -euo pipefail
task=$1 model=$2
shift 2
sizes=("$@")
[[ $# -eq 0 ]] && sizes=(0 128 256 512 1024)
prune=${PRUNE:-build/bin/prune}
py=${PY:-$HOME/.cache/headprune/venv/bin/python}
data=${HEADPRUNE_DATA:-../shared/data}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" - "$task" "$data" "$tmp" <<'PY'
import csv, os, sys
task, data, tmp = sys.argv[1:]
folder, a, b, y = {"mrpc": ("MRPC", 3, 4, 0), "sst2": ("SST-2", 0, None, 1), "stsb": ("STS-B", 7, 8, 9)}[task]
with open(os.path.join(data, "glue", folder, "dev.tsv"), encoding="utf-8-sig") as f, \
        open(os.path.join(tmp, "dev.txt"), "w") as t, open(os.path.join(tmp, "labels.txt"), "w") as l:
    r = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
    next(r)
    for row in r:
        t.write(row[a] + ("\t" + row[b] if b is not None else "") + "\n")
        l.write(row[y] + "\n")
PY
run() { "$prune" infer --model "$model" --task "$task" --data-root "$data" --input "$tmp/dev.txt" --out "$tmp/run" "$@" \
          >/dev/null 2>&1; }
run --output "$tmp/fp32.h5"
for n in "${sizes[@]}"; do run --precision int8 --calibrate "$n" --output "$tmp/int8_$n.h5"; done
"$py" - "$task" "$tmp" "${sizes[@]}" <<'PY'
import sys
import h5py
import numpy as np
from scipy.stats import spearmanr
task, tmp, sizes = sys.argv[1], sys.argv[2], sys.argv[3:]
y = np.loadtxt(f"{tmp}/labels.txt")
def metric(logits):
    if task == "stsb":
        return f"Spearman {100 * spearmanr(logits[:, 0], y).correlation:.2f}"
    p = logits.argmax(1)
    acc = 100 * (p == y).mean()
    if task == "sst2":
        return f"accuracy {acc:.2f}"
    tp = ((p == 1) & (y == 1)).sum()
    f1 = 100 * 2 * tp / (2 * tp + ((p == 1) & (y == 0)).sum() + ((p == 0) & (y == 1)).sum())
    return f"F1 / accuracy {f1:.2f} / {acc:.2f}"
ref = h5py.File(f"{tmp}/fp32.h5")["logits"][:]
print(f"{task} fp32: {metric(ref)}")
for n in sizes:
    q = h5py.File(f"{tmp}/int8_{n}.h5")["logits"][:]
    print(f"{task} int8 N={n}: RMS logit error {np.sqrt(((q - ref) ** 2).mean()):.3f}  {metric(q)}")
PY
