#!/usr/bin/env python3
"""The pruning run for embeddings (#59, prune/embedding/embedding_run.h) on a tiny sentence-transformers folder, checked against
sentence-transformers itself.

A tiny folder (the tiny BERT, mean pooling, Normalize) made with the package is pruned to half of its encoder's FLOPs
by `prune --config configs/sts_embed.yaml --target-flops 0.5` (a short search and recovery, STS-B dev[:200]). Then:
the run's choice is the best of its four steps on the selection slice; the structure fits the budget; the export
loads in SentenceTransformer (remote code: FFN neurons removed) and embeds as `prune embed` does within 1e-5;
`prune eval --task stsb` of the export scores what summary.json reports; the mean cosine to the teacher the summary
gives is sentence-transformers' own over the same sentences; the same command again resumes without redoing the
work and gives the same summary. (--max-drop: tests/embed/frontier_embedding.py.) Exit 77 (CTest: skipped) without sentence-transformers.

Usage: $VENV/bin/python tests/embed/prune_embedding.py --prune build/bin/prune --scratch DIR
"""
import json
import os
import sys

sys.dont_write_bytecode = True  # no tests/embed/__pycache__ in the source tree
from st_common import check, check_export, prune_tiny, run, start  # noqa: E402

RUN_FLAGS = ["--target-flops", "0.5", "--set", "prune.search_examples=96", "--set", "prune.recover_steps=40",
             "--set", "prune.eval_split=dev[:200]", "--set", "prune.latency_batch=4", "--set", "prune.latency_seq=32",
             "--set", "train.lr_peak=0.001"]


def main():
    args, st, models = start()
    folder, cmd, s = prune_tiny(args, st, models, RUN_FLAGS)
    out = os.path.join(args.scratch, "run")
    ok = True
    fin = s["final"]
    budget = fin["budget"]
    steps, chosen = budget["selection_metrics"], budget["selected_step"]
    ok &= check(s["objective"] == "embedding" and s["metric"] == "cosine_spearman" and fin["method"] == "kwon",
                "summary.json in the schema of every run: objective embedding, metric cosine_spearman, method kwon")
    ok &= check(set(steps) == {"searched", "rearranged", "tuned", "recovered"} and
                set(budget["metrics_by_step"]) == {"search", "rearranged", "tuned"},
                f"four steps scored on the selection slice ({sorted(steps)}), the search's three on dev")
    best = max(steps.values())
    ok &= check(steps[chosen] == best,
                f"the choice ({chosen}) is the closest to the teacher on the selection slice {s['select_split']} "
                f"(mean cosine {best / 100:.4f})")
    ok &= check(budget["kept"] <= 0.5 + 1e-9, f"FLOPs kept {budget['kept']:.4f} <= 0.5")
    ref = fin["reference"]
    ok &= check(abs(ref["delta"] - (100 * fin["metrics"]["cosine_spearman"] - ref["unpruned"])) < 1e-9 and
                ref["reference"] == "unpruned", f"the difference from the teacher in points ({ref['delta']:+.2f})")
    rec = json.load(open(os.path.join(out, "recover", "train_result.json"), encoding="utf-8"))
    ok &= check(rec["steps"] == 40 and rec["metric"] == "select_cosine_to_teacher",
                f"the recovery: the trainer's 40 steps, its checkpoint chosen by {rec['metric']}")
    ok &= check(abs(rec["best_metric"] - steps["recovered"] / 100) <= 1e-5,
                f"the recovered model scores what its trainer measured at its kept step {rec['best_step']} "
                f"({rec['best_metric']:.6f} vs {steps['recovered'] / 100:.6f})")
    ok &= check(steps["recovered"] > steps["tuned"],
                f"the recovery brings the tuned model nearer the teacher: "
                f"{steps['tuned'] / 100:.4f} -> {steps['recovered'] / 100:.4f}")
    ok &= check(set(fin["latency"]) == {"batch1", "batch32"} and all(v["speedup"] > 0 for v in fin["latency"].values()),
                "timed against the teacher at batch 1 and 32, as a task run's stage 8")
    export = os.path.join(out, "model")
    ok &= check_export(args, st, folder, s)
    res = os.path.join(args.scratch, "eval.json")
    run([args.prune, "eval", "--model", export, "--task", "stsb", "--max-examples", "200", "--output", res])
    got = 100 * json.load(open(res, encoding="utf-8"))["metrics"]["cosine_spearman"]
    have = 100 * s["final"]["metrics"]["cosine_spearman"]
    ok &= check(abs(got - have) <= 1e-4, f"prune eval of the export {got:.4f} = the run's reported {have:.4f}")
    again = run(cmd)
    s2 = json.load(open(os.path.join(out, "summary.json"), encoding="utf-8"))
    ok &= check("resuming" in again.stderr and "gradients" not in again.stderr and "recovery:" not in again.stderr,
                "the same command resumes: nothing searched or recovered again")
    ok &= check(s2["final"]["budget"] == s["final"]["budget"], "and reports the same steps and choice")
    print("all checks passed" if ok else "some checks FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
