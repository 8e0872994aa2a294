#!/usr/bin/env python3
"""Hard-Concrete gates for embeddings (stage 5 through prune/objective/embedding.cpp) on a tiny sentence-transformers folder, checked
against sentence-transformers itself.

`prune --config configs/sts_embed.yaml --method gates --target-flops 0.5` on a tiny folder (the tiny BERT, mean
pooling, Normalize): the gates train towards the teacher's embeddings, the structure is fixed and fine-tuned. Then:
the structure fits the budget; the fixed phase's distillation loss falls (a student whose embeddings carried no
gradient would not learn); the checkpoint kept is the fixed phase's closest to the teacher on the selection slice,
and the exported model scores there what the trainer measured of the masked one; the evaluation pairs are never
read while training (no dev metric in metrics.csv); the export loads in SentenceTransformer and embeds as `prune
embed` does within 1e-5, at the mean cosine to the teacher the summary reports; the same command again trains
nothing. Exit 77 (CTest: skipped) without sentence-transformers.

Usage: $VENV/bin/python tests/embed/gates_embedding.py --prune build/bin/prune --scratch DIR
"""
import csv
import json
import os
import sys

import numpy as np

sys.dont_write_bytecode = True  # no tests/embed/__pycache__ in the source tree
from st_common import check, check_export, prune_tiny, run, start  # noqa: E402

FLAGS = ["--method", "gates", "--target-flops", "0.5", "--set", "train.max_steps=40", "--set", "train.eval_every=10",
         "--set", "prune.recover_steps=30", "--set", "prune.recover_scale=fixed", "--set", "prune.eval_split=dev[:200]",
         "--set", "prune.latency_batch=4", "--set", "prune.latency_seq=32", "--set", "train.lr_peak=0.001",
         "--set", "gates.lr=0.2"]


def rows(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f))


def series(log, key):
    """(step, value) of one metric in metrics.csv (its long form: step, epoch, key, value)."""
    return [(int(r["step"]), float(r["value"])) for r in log if r["key"] == key]


def main():
    args, st, models = start()
    folder, cmd, s = prune_tiny(args, st, models, FLAGS)
    out = os.path.join(args.scratch, "run")
    ok = True
    g = json.load(open(os.path.join(out, "gates", "train_result.json"), encoding="utf-8"))
    fin = s["final"]
    ok &= check(s["objective"] == "embedding" and fin["method"] == "gates", "summary.json: objective embedding, gates")
    ok &= check(fin["budget"]["kept"] <= 0.5 + 1e-9, f"FLOPs kept {fin['budget']['kept']:.4f} <= 0.5")
    log = rows(os.path.join(out, "gates", "metrics.csv"))
    phase = dict(series(log, "train/phase"))
    fixed = [v for step, v in series(log, "train/task_loss") if phase.get(step) == 2]
    ok &= check(len(fixed) == 30 and np.mean(fixed[-5:]) < 0.8 * np.mean(fixed[:5]),
                f"the fixed phase's {len(fixed)} steps lower the distillation loss: {np.mean(fixed[:5]):.4g} -> "
                f"{np.mean(fixed[-5:]):.4g}")
    evals = [(step, v) for step, v in series(log, "eval/select_cosine_to_teacher") if phase.get(step) == 2]
    best = max(evals, key=lambda e: e[1])
    ok &= check(g["best_step"] == best[0], f"the checkpoint kept (step {g['best_step']}) is the fixed phase's "
                                           f"closest to the teacher on the selection slice (step {best[0]}, {best[1]:.5f})")
    # The export's cosine Spearman on the slice against what the trainer measured of the masked model there (the
    # slimmed model's cosines differ in the last float bits and the tiny model's nearly tie, so ranks may reorder).
    ref = fin["reference"]
    exported, trained = ref["unpruned_select"] + ref["select_delta"], g["final_metrics"]["select_spearman"]
    ok &= check(ref["reference"] == "unpruned" and abs(exported - trained) < 0.5,
                f"the export scores {exported:.3f} on the slice, the masked model {trained:.3f}; the teacher is the "
                f"reference (no control)")
    keys = {r["key"] for r in log}
    ok &= check(not any(k.startswith("eval/") and "select" not in k and k != "eval/step" for k in keys),
                f"only the selection slice is evaluated while training: {sorted(k for k in keys if k.startswith('eval/'))}")
    ok &= check_export(args, st, folder, s)
    again = run(cmd)
    s2 = json.load(open(os.path.join(out, "summary.json"), encoding="utf-8"))
    ok &= check("[train]" not in again.stderr and s2["final"]["metrics"] == s["final"]["metrics"],
                "the same command trains nothing again and reports the same scores")
    print("all checks passed" if ok else "some checks FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
