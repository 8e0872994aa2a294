#!/usr/bin/env bash
# The GPU checks in one run (#62, docs/gpu.md): on a machine with a CUDA GPU and PyTorch's pip wheel (its LibTorch),
# builds headprune against that LibTorch with every core, runs the CUDA tests, times headprune's training step and
# forward beside PyTorch's on the same GPU, and fine-tunes on SST-2 there through `prune train --device cuda`.
# Writes its logs into $OUT (default build-gpu/out) and prints a summary; each stage says how long it took, and a
# stage that would not fit the time left (HP_GPU_BUDGET_S, default 540 s) is skipped, saying so.
#
# Any CUDA machine: python3 with torch (CUDA) and transformers, CMake, ninja, g++, and headprune's libraries
# (scripts/setup.sh lists them). What that machine lacks can come as Debian .debs in .gpu/debs (unpacked into
# .gpu/prefix, never into /), and ../shared (GLUE SST-2 and the vocabulary) as .gpu/shared when it is not beside
# the checkout. With this workplace's `device` tool (a copy of the working tree, nothing fetched there):
#   here, once:  mkdir -p .gpu/debs && (cd .gpu/debs && apt-get download libdnnl2 libdnnl-dev libutf8proc2 \
#                  libutf8proc-dev catch2); mkdir -p .gpu/shared/data/glue/SST-2 .gpu/shared/vocab; copy
#                  ../shared/data/glue/SST-2/{train,dev}.tsv and ../shared/vocab/* there; echo /.gpu/ >> .git/info/exclude
#   device run:  command "scripts/gpu_check.sh", carry [".gpu"]
# Usage: scripts/gpu_check.sh [--no-compile]   (--no-compile: leave out the torch.compile rows of PyTorch)
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
BUILD="${BUILD_DIR:-$REPO/build-gpu}"
OUT="${OUT:-$BUILD/out}"
BUDGET="${HP_GPU_BUDGET_S:-540}"
COMPILE=1
for arg in "$@"; do
  case "$arg" in
    --no-compile) COMPILE=0 ;;
    *) echo "gpu_check: error: unknown option '$arg'; use --no-compile or nothing" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT" "$BUILD"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
T0=$SECONDS
FAILED=()
stage() { echo; echo "=== [$((SECONDS - T0)) s] $*"; }
fits() {  # fits SECONDS NAME: whether a stage of about SECONDS still fits the budget
  if ((SECONDS - T0 + $1 > BUDGET)); then
    echo "--- skipped $2: about $1 s left to do, $((BUDGET - SECONDS + T0)) s of the budget left"
    return 1
  fi
}
fail() { FAILED+=("$1"); echo "--- FAILED: $1"; }

stage "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || fail "nvidia-smi"
TORCH_CMAKE=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') || { echo "no torch in python3"; exit 1; }
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
echo "cores: $(nproc)"

stage "carried packages and data"
PREFIX="$REPO/.gpu/prefix"
if compgen -G ".gpu/debs/*.deb" >/dev/null; then
  mkdir -p "$PREFIX"
  for f in .gpu/debs/*.deb; do dpkg -x "$f" "$PREFIX"; done
  export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "unpacked $(ls .gpu/debs | wc -l) packages into $PREFIX"
fi
if [[ ! -d "$REPO/../shared/data" && -d .gpu/shared ]]; then
  cp -r .gpu/shared "$REPO/../shared" && echo "../shared from .gpu/shared"
fi

stage "configure and build (LibTorch from $TORCH_CMAKE, $(nproc) cores)"
T=$SECONDS
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHP_BUILD_BENCH=ON \
  -DCMAKE_PREFIX_PATH="$PREFIX/usr;$TORCH_CMAKE" -DHP_REF_PYTHON="$(command -v python3)" >"$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log"; echo "configure failed"; exit 1; }
grep "headprune:" "$OUT/configure.log"
# -k 0: a target that fails to build leaves the others to run.
ninja -C "$BUILD" -k 0 -j"$(nproc)" prune hp_train_tests gpu_step_bench >"$OUT/build.log" 2>&1 \
  || { grep -E "error|FAILED" "$OUT/build.log" | head -40; fail "build"; }
echo "built in $((SECONDS - T)) s"
PRUNE="$BUILD/bin/prune"
"$PRUNE" --version || fail "prune --version"

stage "CUDA tests (train.device_test and train.device_cuda)"
T=$SECONDS
timeout 300 ctest --test-dir "$BUILD" -R '^train\.device' --output-on-failure >"$OUT/tests.log" 2>&1 || fail "CUDA tests"
grep -E "tests passed|Passed|Failed|Skipped|\*\*\*|WARN|difference|with expansion" "$OUT/tests.log" | head -40
echo "tests took $((SECONDS - T)) s"

stage "headprune's training step and forward on the GPU"
BENCH=$(find "$BUILD" -name gpu_step_bench -type f -perm -u+x | head -1)
timeout 150 "$BENCH" --device cuda | tee "$OUT/bench_headprune.txt" || fail "gpu_step_bench"

stage "PyTorch's (eager) on the same GPU"
timeout 200 python3 bench/gpu_step_bench.py --device cuda | tee "$OUT/bench_pytorch.txt" || fail "gpu_step_bench.py"

stage "prune train on SST-2 on the GPU (random weights of MiniLM's shape, bf16, 1 epoch)"
if fits 150 "the SST-2 fine-tune"; then
  MODEL="$BUILD/minilm_random"
  python3 - "$MODEL" <<'EOF'
import sys, torch
from transformers import BertConfig, BertForSequenceClassification
torch.manual_seed(0)
cfg = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
                 num_labels=2)
BertForSequenceClassification(cfg).save_pretrained(sys.argv[1])
EOF
  cp "$REPO/../shared/vocab/vocab.txt" "$MODEL/"
  T=$SECONDS
  timeout 240 "$PRUNE" train --model "$MODEL" --task sst2 --device cuda --precision bf16 --epochs 1 --lr 1e-4 \
    --out "$BUILD/runs/sst2_gpu" >"$OUT/train_gpu.log" 2>&1 || fail "prune train --device cuda"
  grep -E "training on|step [0-9]+ accuracy|examples/s|error" "$OUT/train_gpu.log" | tail -8
  echo "prune train (1 epoch, SST-2, GPU) took $((SECONDS - T)) s"
fi

if ((COMPILE)); then
  stage "PyTorch torch.compile rows (MiniLM)"
  if fits 200 "the torch.compile rows"; then
    timeout 240 python3 bench/gpu_step_bench.py --device cuda --models minilm --compile 2>&1 | grep -v eager \
      | tee "$OUT/bench_pytorch_compile.txt" || fail "gpu_step_bench.py --compile"
  fi
fi

stage "summary ($((SECONDS - T0)) s in all)"
for f in "$OUT"/bench_*.txt; do grep "^row" "$f"; done | sort -k2,2 -k4,4 -k3,3
if ((${#FAILED[@]})); then
  echo "FAILED: ${FAILED[*]}"
  exit 1
fi
echo "all stages passed"
