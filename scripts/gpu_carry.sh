#!/usr/bin/env bash
# Makes .gpu/, what a GPU machine that can fetch nothing needs beside the checkout for scripts/gpu_check.sh (#62):
# Debian's packages that its image lacks (oneDNN, utf8proc, Catch2 2) as .debs, SST-2's train and dev splits and the
# vocabulary from ../shared, and the SST-2 fine-tune for CoFi's recipe at bf16 (its 91 MB at fp32 would not fit the
# 64 MiB a call of this workplace's `device` tool carries). .gpu/ is ignored by git; name it in the call's carry:
#   run  command "scripts/gpu_check.sh"  carry [".gpu"]
# Usage: scripts/gpu_carry.sh [FINETUNED_MODEL]   (default runs/sst2/finetune/best: README command 1's fine-tune)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
FT=${1:-runs/sst2/finetune/best}
SHARED=../shared
PRUNE=${PRUNE:-build/bin/prune}
[[ -f $FT/config.json ]] || { echo "gpu_carry: no model at $FT; pass the SST-2 fine-tune's folder" >&2; exit 2; }
[[ -x $PRUNE ]] || { echo "gpu_carry: no $PRUNE; build first (scripts/setup.sh) or set PRUNE=" >&2; exit 2; }
mkdir -p .gpu/debs .gpu/shared/data/glue/SST-2 .gpu/shared/vocab
(cd .gpu/debs && apt-get download libdnnl2 libdnnl-dev libutf8proc2 libutf8proc-dev catch2 2>&1 >/dev/null \
  | grep -v "unsandboxed as root" || true)
cp "$SHARED"/data/glue/SST-2/{train,dev}.tsv .gpu/shared/data/glue/SST-2/
cp "$SHARED"/vocab/* .gpu/shared/vocab/
"$PRUNE" export --model "$FT" --to .gpu/sst2_ft --force --set export.dtype=bf16 --set export.hdf5=false >/dev/null
tree_mb=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
gpu_mb=$(du -sb .gpu | cut -f1)
echo "gpu_carry: .gpu/ $((gpu_mb / 1048576)) MiB + the tracked tree $((tree_mb / 1048576)) MiB of the 64 MiB a call carries"
((gpu_mb + tree_mb < 64 * 1048576)) || { echo "gpu_carry: over 64 MiB" >&2; exit 1; }
