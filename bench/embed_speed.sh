#!/usr/bin/env bash
# `prune embed` against SentenceTransformer.encode (#59): the first N (10,000) sentences of SST-2's train split,
# embedded whole by each (process start, model load and writing the .npy included), batch 32, the same thread count,
# A and B in turn under farm-bench (the ratio taken pair by pair). headprune at each precision of PRECISIONS against
# sentence-transformers at fp32 (PyTorch eager, the reference venv's). Prints farm-bench's reports and checks that
# both wrote the same embeddings (fp32 within 1e-5). ST_MODEL (default MODEL) is the folder sentence-transformers
# embeds with: MODEL a pruned export (RUN_DIR/model of prune.objective: embedding) against ST_MODEL the unpruned one
# is what a user gains; the report then gives the mean cosine of the two models' embeddings.
# Usage: bench/embed_speed.sh   (env PRUNE = build/bin/prune, MODEL = checkpoints/all-MiniLM-L6-v2, ST_MODEL, N = 10000,
#                               THREADS = 2, RUNS = 3, PRECISIONS = "fp32 int8", PY = the reference venv's python)
set -euo pipefail
PRUNE="${PRUNE:-build/bin/prune}"
MODEL="${MODEL:-checkpoints/all-MiniLM-L6-v2}"
ST_MODEL="${ST_MODEL:-$MODEL}"
N="${N:-10000}"
THREADS="${THREADS:-2}"
RUNS="${RUNS:-3}"
PY="${PY:-$HOME/.cache/headprune/venv/bin/python}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
awk -F'\t' -v n="$N" 'NR > 1 && NR <= n + 1 { print $1 }' ../shared/data/glue/SST-2/train.tsv > "$work/sentences.txt"
echo "embed_speed: $(wc -l < "$work/sentences.txt") SST-2 train sentences, $MODEL (sentence-transformers: $ST_MODEL), $THREADS threads, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for p in ${PRECISIONS:-fp32 int8}; do
  echo "== A: prune embed --precision $p   B: SentenceTransformer.encode (fp32)"
  farm-bench -n "$RUNS" --timeout 3000 --vs "$PY bench/st_encode.py $ST_MODEL $work/sentences.txt $work/st.npy --threads $THREADS" \
    -- "$PRUNE" embed --model "$MODEL" --input "$work/sentences.txt" --output "$work/hp_$p.npy" --batch 32 \
       --precision "$p" --threads "$THREADS"
done
"$PY" - "$work" <<'PYEOF'
import sys, numpy as np
w = sys.argv[1]
ref = np.load(f"{w}/st.npy")
for p in ("fp32", "int8"):
    try:
        e = np.load(f"{w}/hp_{p}.npy")
    except OSError:
        continue
    cos = (e * ref).sum(1) / (np.linalg.norm(e, axis=1) * np.linalg.norm(ref, axis=1))
    print(f"{p}: max |prune embed - encode| {np.abs(e - ref).max():.2e}, mean cosine to sentence-transformers' {cos.mean():.6f}")
PYEOF
