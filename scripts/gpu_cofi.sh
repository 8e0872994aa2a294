#!/usr/bin/env bash
# CoFi's recipe on SST-2 on a GPU (#62), the stage of scripts/gpu_check.sh that brings models back for the frontier
# (#58, `prune.frontier_models`): from the fine-tuned model carried at 16 bits (.gpu/sst2_ft, `scripts/gpu_carry.sh`),
# `prune train` with Hard-Concrete gates on heads, FFN neurons, sublayers, whole layers and hidden channels, logit
# and layer distillation (CoFi's), at each FLOPs budget of HP_COFI_BUDGETS, then the structure fixed and fine-tuned
# as long again; choices on train[holdout:1000], as the pruning run makes them. The epochs per phase are as many as
# fit the seconds given (HP_COFI_S), measured by a 300-step probe, at most HP_COFI_EPOCHS (CoFi: 10 or more); under
# one epoch, a seeded share of the training rows instead. Each model is slimmed and exported at bf16 and scored on
# SST-2 dev there; all of it comes back as one tar split into 15 MB parts ($OUT/cofi.tar.NN), which
# `cat cofi.tar.* | tar -x -C runs/gpu` unpacks here (docs/gpu.md).
#
# Usage: scripts/gpu_cofi.sh PRUNE OUT WORK
#   PRUNE: the prune binary; OUT: where the tar parts go; WORK: a scratch folder for the runs.
# Environment: HP_COFI_S (default 300), HP_COFI_EPOCHS (10), HP_COFI_BUDGETS ("30 20", percent of the FLOPs kept),
#   HP_COFI_MODEL (.gpu/sst2_ft), HP_COFI_DEVICE (cuda; cpu for a dry run of the commands), HP_COFI_PRECISION
#   (bf16 on cuda, fp32 on cpu), HP_COFI_EXAMPLES (0 = the whole training split; a dry run takes a few hundred),
#   HP_COFI_PROBE_STEPS (300). A dry run of the commands on the CPU here, in about 3 minutes:
#   HP_COFI_DEVICE=cpu HP_COFI_EXAMPLES=256 HP_COFI_PROBE_STEPS=10 HP_COFI_S=150 \
#     scripts/gpu_cofi.sh build/bin/prune /tmp/cofi_out /tmp/cofi_work
set -uo pipefail
if (($# != 3)); then
  echo "usage: scripts/gpu_cofi.sh PRUNE OUT WORK" >&2
  exit 2
fi
PRUNE=$1 OUT=$2 WORK=$3
MODEL=${HP_COFI_MODEL:-.gpu/sst2_ft}
DEVICE=${HP_COFI_DEVICE:-cuda}
PRECISION=${HP_COFI_PRECISION:-$([[ $DEVICE == cpu ]] && echo fp32 || echo bf16)}
SECONDS_GIVEN=${HP_COFI_S:-300}
EPOCHS_MAX=${HP_COFI_EPOCHS:-10}
read -r -a BUDGETS <<<"${HP_COFI_BUDGETS:-30 20}"
EXAMPLES=${HP_COFI_EXAMPLES:-0}
PROBE=${HP_COFI_PROBE_STEPS:-300}
if [[ ! -f $MODEL/config.json ]]; then
  echo "gpu_cofi: no fine-tuned model at $MODEL (scripts/gpu_carry.sh makes it); skipped"
  exit 0
fi
mkdir -p "$OUT" "$WORK"
T0=$SECONDS
# CoFi: every structure gated, logit KL and the layer map's distillation throughout; the training rows less the
# held-out 1,000 on which the best checkpoint is chosen (dev is only reported).
COMMON=(train --config configs/sst2.yaml --model "$MODEL" --device "$DEVICE" --precision "$PRECISION" --distill
  --set gates.distill_hidden=1 --set gates.layer_gates=true --set gates.hidden_gates=true
  --set "train.train_split=train[rest:1000]" --set "train.eval_split=train[holdout:1000]" --set train.max_steps=0)

# The probe: PROBE gated steps at the tightest budget, whose steps per second (training steps alone) set the epochs.
"$PRUNE" "${COMMON[@]}" --target-flops "0.${BUDGETS[-1]}" --max-train-examples "$EXAMPLES" --set "train.max_steps=$PROBE" \
  --set gates.finetune_after=false --out "$WORK/probe" >"$WORK/probe.log" 2>&1 \
  || { tail -5 "$WORK/probe.log"; echo "gpu_cofi: the probe failed"; exit 1; }
PLAN=$(python3 - "$WORK/probe/train_result.json" "$SECONDS_GIVEN" "$((SECONDS - T0))" "${#BUDGETS[@]}" \
  "$EPOCHS_MAX" "$EXAMPLES" <<'EOF'
import json, math, sys
result, given, spent, budgets, cap, examples = sys.argv[1], *map(float, sys.argv[2:])
sps = json.load(open(result))["steps_per_s"]
rows = examples if examples > 0 else 66349 - 1000  # SST-2's training rows less the held-out ones (about)
steps_per_epoch = math.ceil(rows / 32)
# Two phases per budget; a tenth of the time for loading, evaluations each epoch, the export and its scoring.
epochs = (given - spent) * 0.9 / budgets / (2 * steps_per_epoch / sps)
if epochs >= 1:
    print(int(min(epochs, cap)), 0, f"{sps:.1f} steps/s")
else:  # a share of the rows, one epoch per phase (what the CPU recipes do)
    print(1, max(2048, int(rows * epochs)), f"{sps:.1f} steps/s")
EOF
) || { echo "gpu_cofi: no plan from the probe"; exit 1; }
read -r EPOCHS ROWS RATE <<<"$PLAN"
((ROWS == 0)) && ROWS=$EXAMPLES
echo "gpu_cofi: probe $RATE on $DEVICE ($PRECISION); plan: $EPOCHS epoch(s) per phase on $( ((ROWS)) && echo "$ROWS" \
  || echo all) training rows, budgets ${BUDGETS[*]}% of the FLOPs"

mkdir -p "$WORK/cofi"
for P in "${BUDGETS[@]}"; do
  T=$SECONDS
  RUN="$WORK/runs/cofi$P" EXPORT="$WORK/cofi/cofi$P"
  if ! "$PRUNE" "${COMMON[@]}" --target-flops "0.$P" --epochs "$EPOCHS" --set "gates.finetune_epochs=$EPOCHS" \
    --max-train-examples "$ROWS" --out "$RUN" >"$WORK/cofi/train$P.log" 2>&1; then
    tail -5 "$WORK/cofi/train$P.log"
    echo "gpu_cofi: the ${P}% run failed"
    continue
  fi
  "$PRUNE" export --model "$RUN/best" --mask "$RUN/head_mask.txt" --to "$EXPORT" --set export.dtype=bf16 \
    --set export.hdf5=false >"$WORK/cofi/export$P.log" 2>&1 || { tail -3 "$WORK/cofi/export$P.log"; continue; }
  cp "$RUN/train_result.json" "$RUN/metrics.csv" "$EXPORT/" 2>/dev/null
  "$PRUNE" eval --model "$EXPORT" --task sst2 --device "$DEVICE" --output "$EXPORT/eval_dev_$DEVICE.json" 2>&1 \
    | grep -E "^sst2 dev" | sed "s/^/gpu_cofi: ${P}% /"
  echo "gpu_cofi: ${P}% trained, exported and scored in $((SECONDS - T)) s"
done
if compgen -G "$WORK/cofi/cofi*/config.json" >/dev/null; then
  tar -C "$WORK" -cf - cofi | split -b 15000000 -d - "$OUT/cofi.tar."
  echo "gpu_cofi: $(ls "$OUT"/cofi.tar.* | wc -l) part(s) in $OUT; here: cat cofi.tar.* | tar -x -C runs/gpu"
fi
echo "gpu_cofi: $((SECONDS - T0)) s in all"
