#!/usr/bin/env bash
# One-command setup on a fresh Debian 12 machine: apt packages (LibTorch, OpenBLAS, build tools),
# the Python reference and the real model (scripts/setup_python.sh), then a Release build in build/ of what the
# pruning run needs (`prune`), installed so that `prune` is on the PATH. With --tests, also the test binaries,
# the benchmarks and the clang fuzz targets, and the test-only apt packages (Chromium, clang).
# Re-running is fast and harmless: every step checks before it acts. Each step prints how long it took.
# Usage: scripts/setup.sh [--tests] [--v5] [--torch PATH|pip]   (env BUILD_DIR to build elsewhere, HP_PREFIX to
#                                             install elsewhere than /usr/local, HP_WERROR=ON for CI)
#   --torch PATH: build against the LibTorch whose CMake package is under PATH (a LibTorch 2.x, CPU or CUDA, e.g.
#                 $(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')) instead of Debian's 1.13,
#                 in BUILD_DIR (default build-torch2); --torch pip installs PyPI's torch==2.11.0 into a venv at
#                 ~/.cache/headprune/venv-torch2 first (~4 GB with its CUDA libraries, which link without a GPU).
#                 Data-parallel runs need Gloo's headers, which that wheel lacks: such a build runs one process.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR_SET="${BUILD_DIR:-}"
BUILD_DIR="${BUILD_DIR:-$REPO/build}"
readonly APT_PKGS=(build-essential cmake ninja-build ccache pkg-config librsvg2-bin
  libtorch-dev libopenblas0-openmp libyaml-cpp-dev libeigen3-dev catch2 libhdf5-dev
  libcli11-dev nlohmann-json3-dev libutf8proc-dev libspdlog-dev libfmt-dev libboost-dev zlib1g-dev
  libsentencepiece-dev  # XLM-R's tokenizer (core/text/sentencepiece_model.cpp) runs the SentencePiece library
  libdnnl-dev  # oneDNN's dnnl.h: the prototypes of the sgemm that core/kernels/gemm.cpp dlopens
  libcsv-dev  # the CSV/TSV reader of a user's own data files (core/data/file_dataset.cpp)
  libgloo-dev python3-torch)  # Gloo headers for c10d's ProcessGroupGloo; torchrun for data-parallel runs
readonly TEST_APT_PKGS=(chromium fonts-dejavu-core  # chromium: the report's browser test (tests/report/browser_check.py)
  clang)  # clang: the libFuzzer targets of the file parsers (tests/fuzz, bench/fuzz.sh)

WANT_TESTS=0
PY_ARGS=()
TORCH=""
while (($#)); do
  case "$1" in
    --tests) WANT_TESTS=1 ;;
    --v5) PY_ARGS+=(--v5) ;;
    --torch) [[ $# -ge 2 ]] || { echo "setup: error: --torch needs a path or 'pip'" >&2; exit 2; }
             TORCH="$2"; shift ;;
    *) echo "setup: error: unknown option '$1'; use --tests, --v5, --torch PATH|pip or nothing" >&2; exit 2 ;;
  esac
  shift
done
TORCH_ARGS=()
if [[ -n "$TORCH" ]]; then
  if [[ "$TORCH" == pip ]]; then
    TV="${HEADPRUNE_CACHE:-$HOME/.cache/headprune}/venv-torch2"
    [[ -x "$TV/bin/python" ]] || python3 -m venv "$TV" || { echo "setup: error: python3 -m venv $TV failed" >&2; exit 1; }
    "$TV/bin/python" -c 'import torch' 2>/dev/null || "$TV/bin/pip" install -q torch==2.11.0 \
      || { echo "setup: error: pip install torch==2.11.0 failed (PyPI reachable?)" >&2; exit 1; }
    TORCH=$("$TV/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
  fi
  [[ -d "$TORCH/Torch" ]] || { echo "setup: error: --torch $TORCH holds no Torch/TorchConfig.cmake; pass the folder" \
    "python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' prints, or pip" >&2; exit 2; }
  TORCH_ARGS=(-DCMAKE_PREFIX_PATH="$TORCH")
  BUILD_DIR="${BUILD_DIR_SET:-$REPO/build-torch2}"
fi

step() { echo "[setup] $*"; }
die() { echo "setup: error: $*" >&2; exit 1; }
T0=$SECONDS
T_STEP=$SECONDS
took() {  # after a step: how long it took, and the time since setup started
  echo "[setup]   ... $1 took $((SECONDS - T_STEP)) s (setup so far $((SECONDS - T0)) s)"
  T_STEP=$SECONDS
}

# 1. apt packages, only when one is missing.
missing=()
wanted=("${APT_PKGS[@]}")
((WANT_TESTS)) && wanted+=("${TEST_APT_PKGS[@]}")
for p in "${wanted[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  step "apt: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq || die "apt-get update failed; check the apt sources"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    || die "apt-get install failed for: ${missing[*]}"
else
  step "apt: build packages already installed"
fi
took apt

# 2. LibTorch calls whatever libblas.so.3 is selected: make it OpenBLAS (the reference BLAS is ~80x slower).
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 || true)
if [[ "$blas" != *openblas* ]]; then
  step "blas: selecting OpenBLAS for libblas.so.3 (was $blas)"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO update-alternatives --set libblas.so.3-x86_64-linux-gnu \
    /usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3 || die "could not select OpenBLAS"
else
  step "blas: libblas.so.3 is OpenBLAS ($blas)"
fi

# 3. Python reference (transformers, tokenizers) and the real model linked under checkpoints/.
"$REPO/scripts/setup_python.sh" "${PY_ARGS[@]}"  # --v5: also the transformers 5 venv
took "python venv"

# 4. Release build (ccache keeps rebuilds fast, see CMakeLists.txt): `prune` and the library it loads, or
#    everything with --tests.
targets=(prune hp_spm_shim)
((WANT_TESTS)) && targets=(all)
step "build: ${targets[*]} in $BUILD_DIR"
cmake -S "$REPO" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHP_WERROR="${HP_WERROR:-OFF}" "${TORCH_ARGS[@]}" >/dev/null \
  || die "cmake configure failed; see the output above"
ninja -C "$BUILD_DIR" -j"$(nproc)" "${targets[@]}" || die "build failed; see the compiler output above"
took build

# 5. `prune` on the PATH: the binary into $PREFIX/bin, the shipped configs into $PREFIX/share/headprune/configs
#    (where `prune --config NAME` finds them). HP_PREFIX picks another prefix (its bin/ must be on the PATH).
PREFIX="${HP_PREFIX:-/usr/local}"
SUDO=""; [[ $(id -u) -ne 0 && ! -w "$PREFIX" ]] && SUDO="sudo"
step "install: $PREFIX/bin/prune, configs in $PREFIX/share/headprune/configs"
$SUDO cmake --install "$BUILD_DIR" --prefix "$PREFIX" >/dev/null || die "cmake --install into $PREFIX failed; set HP_PREFIX to a writable prefix"
command -v prune >/dev/null || echo "[setup] note: $PREFIX/bin is not on your PATH; add it (export PATH=\"$PREFIX/bin:\$PATH\")"
took install

# 6. With --tests: the parsers' libFuzzer targets (clang, ASan + UBSan, no LibTorch): CTest runs each briefly (fuzz.*).
if ((WANT_TESTS)); then
  step "build: $REPO/build-fuzz (fuzz targets)"
  CC=clang CXX=clang++ cmake -S "$REPO" -B "$REPO/build-fuzz" -G Ninja -DHP_FUZZ=ON >/dev/null \
    || die "cmake configure of the fuzz targets failed; see the output above"
  ninja -C "$REPO/build-fuzz" -j"$(nproc)" >/dev/null || die "building the fuzz targets failed"
  took "fuzz build"
fi
step "done in $((SECONDS - T0)) s: prune --help ($PREFIX/bin/prune; the build tree's is $BUILD_DIR/bin/prune)"
