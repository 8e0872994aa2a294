#!/usr/bin/env bash
# The GPU checks in one run (#62, docs/gpu.md): on a machine with a CUDA GPU and PyTorch's pip wheel (its LibTorch),
# builds headprune against that LibTorch with every core, runs the CUDA tests, times headprune's training step and
# forward beside PyTorch's on the same GPU, trains CoFi's gates on SST-2 there (scripts/gpu_cofi.sh), runs README
# command 1 and analyze there, and fine-tunes through `prune train --device cuda`, eagerly and with train.cuda_graph.
# Writes its logs into $OUT (default build-gpu/out) and prints a summary; each stage says how long it took, and a
# stage that would not fit the time left (HP_GPU_BUDGET_S, default 540 s) is skipped, saying so.
#
# Any CUDA machine: python3 with torch (CUDA) and transformers, CMake, ninja, g++, and headprune's libraries
# (scripts/setup.sh lists them). What that machine lacks can come as Debian .debs in .gpu/debs (unpacked into
# .gpu/prefix, never into /), and ../shared (GLUE SST-2 and the vocabulary) as .gpu/shared when it is not beside
# the checkout. With this workplace's `device` tool (a copy of the working tree, nothing fetched there):
#   here, once:  scripts/gpu_carry.sh runs/sst2/finetune/best   (.gpu/: the .debs, SST-2, the vocabulary and the
#                fine-tune at bf16 for CoFi's recipe; 60 of the 64 MiB a call carries)
#   device run:  command "scripts/gpu_check.sh", carry [".gpu"], timeout_s about 60 more than HP_GPU_BUDGET_S
# CoFi's recipe on SST-2 (scripts/gpu_cofi.sh) runs when .gpu/sst2_ft was carried (scripts/gpu_carry.sh makes .gpu/
# whole), with the time left after the stages before it but 60 s; its models come back as $OUT/cofi.tar.NN, and the
# logs other than gpu_check.log as $OUT/logs.tgz (the device tool brings back 8 files at most).
# Usage: scripts/gpu_check.sh [--no-compile] [--skip STAGES]
#   --no-compile: leave out the torch.compile rows of PyTorch; --skip: a comma list of tests, bench, cofi, curves,
#   train, compile (e.g. --skip bench,train once the benchmarks are measured, to give CoFi the time). CoFi takes the
#   time left but 60 s, so `curves` (README command 1 and analyze on the GPU, for their wall time) runs in a call
#   that skips cofi: --skip bench,cofi,train,compile
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 1
BUILD="${BUILD_DIR:-$REPO/build-gpu}"
OUT="${OUT:-$BUILD/out}"
BUDGET="${HP_GPU_BUDGET_S:-540}"
SKIP=","
while (($#)); do
  case "$1" in
    --no-compile) SKIP+="compile," ;;
    --skip) SKIP+="${2:-},"; shift ;;
    *) echo "gpu_check: error: unknown option '$1'; use --no-compile, --skip STAGES or nothing" >&2; exit 2 ;;
  esac
  shift
done
for s in ${SKIP//,/ }; do
  [[ $s =~ ^(tests|bench|cofi|curves|train|compile)$ ]] \
    || { echo "gpu_check: error: --skip '$s'; the stages are tests, bench, cofi, curves, train, compile" >&2; exit 2; }
done
runs() { [[ $SKIP != *",$1,"* ]]; }
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
ninja -C "$BUILD" -k 0 -j"$(nproc)" prune hp_train_tests hp_device_tests gpu_step_bench >"$OUT/build.log" 2>&1 \
  || { grep -E "error|FAILED" "$OUT/build.log" | head -40; fail "build"; }
echo "built in $((SECONDS - T)) s"
PRUNE="$BUILD/bin/prune"
"$PRUNE" --version || fail "prune --version"

if runs tests; then
  stage "CUDA tests (train.device_test, train.device_cuda, prune.device_cuda)"
  T=$SECONDS
  timeout 300 ctest --test-dir "$BUILD" -R '^train\.device|^prune\.device' --output-on-failure >"$OUT/tests.log" 2>&1 || fail "CUDA tests"
  grep -E "tests passed|Passed|Failed|Skipped|\*\*\*|WARN|difference|with expansion" "$OUT/tests.log" | head -40
  echo "tests took $((SECONDS - T)) s"
fi

if runs bench; then
  stage "headprune's training step and forward on the GPU"
  BENCH=$(find "$BUILD" -name gpu_step_bench -type f -perm -u+x | head -1)
  timeout 150 "$BENCH" --device cuda | tee "$OUT/bench_headprune.txt" || fail "gpu_step_bench"

  stage "PyTorch's (eager) on the same GPU"
  timeout 200 python3 bench/gpu_step_bench.py --device cuda | tee "$OUT/bench_pytorch.txt" || fail "gpu_step_bench.py"
fi

if runs cofi && [[ -f .gpu/sst2_ft/config.json ]]; then
  stage "CoFi's recipe on SST-2 (scripts/gpu_cofi.sh): gates at ${HP_COFI_BUDGETS:-30 20}% of the FLOPs"
  if fits 180 "CoFi's recipe"; then
    HP_COFI_S=$((BUDGET - SECONDS + T0 - 60)) scripts/gpu_cofi.sh "$PRUNE" "$OUT" "$BUILD/cofi_work" || fail "CoFi's recipe"
  fi
fi

if runs curves && [[ -f .gpu/sst2_ft/config.json ]]; then
  stage "README command 1 on the GPU (six criteria, their curves, 36 heads, recovery) and analyze"
  if fits 240 "README command 1 and analyze"; then
    # Against the CPU run of the same command: each stage's start is in the log (docs/gpu.md has the CPU's).
    T=$SECONDS
    timeout 300 "$PRUNE" --config configs/sst2.yaml --model .gpu/sst2_ft --target-heads 36 --device cuda \
      --out "$BUILD/runs/heads36_gpu" >"$OUT/heads36_gpu.log" 2>&1 || fail "README command 1 --device cuda"
    grep -E "stage [0-9]+/|scoring attattr|criteria score on|error" "$OUT/heads36_gpu.log" | cut -c1-160
    echo "README command 1 on the GPU took $((SECONDS - T)) s"
    T=$SECONDS
    timeout 120 "$PRUNE" analyze --model .gpu/sst2_ft --task sst2 --device cuda --out "$BUILD/runs/analysis_gpu" \
      >"$OUT/analyze_gpu.log" 2>&1 || fail "prune analyze --device cuda"
    grep -E "forwards on|error" "$OUT/analyze_gpu.log" | head -5
    echo "prune analyze (SST-2 dev, GPU) took $((SECONDS - T)) s"
  fi
fi

if runs train; then
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
    # The same run with the steps of full batches replayed as CUDA graphs, one per length bucket (train.cuda_graph).
    if fits 150 "the SST-2 fine-tune with train.cuda_graph"; then
      T=$SECONDS
      timeout 240 "$PRUNE" train --model "$MODEL" --task sst2 --device cuda --precision bf16 --epochs 1 --lr 1e-4 \
        --set train.cuda_graph=true --out "$BUILD/runs/sst2_gpu_graph" >"$OUT/train_gpu_graph.log" 2>&1 \
        || fail "prune train --device cuda --set train.cuda_graph=true"
      grep -E "training on|cuda_graph|step [0-9]+ accuracy|examples/s|error" "$OUT/train_gpu_graph.log" | tail -10
      echo "prune train with train.cuda_graph (1 epoch, SST-2, GPU) took $((SECONDS - T)) s"
    fi
    # Both runs' rates side by side (the result line of prune train: "... N steps, X steps/s, Y examples/s").
    for run in train_gpu train_gpu_graph; do
      [[ -f "$OUT/$run.log" ]] || continue
      echo "steps/s $run: $(grep -oE '[0-9.e+]+ steps/s, [0-9.e+]+ examples/s' "$OUT/$run.log" | tail -1)"
    done | tee "$OUT/train_steps.txt"
  fi
fi

if runs compile; then
  stage "PyTorch torch.compile rows (MiniLM)"
  if fits 200 "the torch.compile rows"; then
    timeout 240 python3 bench/gpu_step_bench.py --device cuda --models minilm --compile 2>&1 | grep -v eager \
      | tee "$OUT/bench_pytorch_compile.txt" || fail "gpu_step_bench.py --compile"
  fi
fi

stage "summary ($((SECONDS - T0)) s in all)"
for f in "$OUT"/bench_*.txt; do [[ -f $f ]] && grep "^row" "$f"; done | sort -k2,2 -k4,4 -k3,3
# The device tool brings back 8 files: every log but this one in logs.tgz (their lines that matter are above).
(cd "$OUT" && shopt -s nullglob && logs=() && for f in *.log *.txt; do [[ $f == gpu_check.log ]] || logs+=("$f"); done \
  && ((${#logs[@]})) && tar -czf logs.tgz "${logs[@]}" && rm -f "${logs[@]}")
if ((${#FAILED[@]})); then
  echo "FAILED: ${FAILED[*]}"
  exit 1
fi
echo "all stages passed"
