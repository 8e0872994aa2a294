#!/usr/bin/env python3
"""The pruning run for embeddings (#59, prune/embedding_run.h) on a tiny sentence-transformers folder, checked against
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

import numpy as np

sys.dont_write_bytecode = True  # no tests/embed/__pycache__ in the source tree
from st_common import REPO, check, run, start, stsb_dev, tiny_model  # noqa: E402

RUN_FLAGS = ["--target-flops", "0.5", "--set", "prune.search_examples=96", "--set", "prune.recover_steps=40",
             "--set", "prune.eval_split=dev[:200]", "--set", "prune.latency_batch=4", "--set", "prune.latency_seq=32",
             "--set", "train.lr_peak=0.001"]


def dev_pairs(n=200):
    return [(a, b) for a, b, _ in stsb_dev(n)]


def main():
    args, st, models = start()
    folder = tiny_model(st, models, "mean", True, os.path.join(args.scratch, "tiny_st"))
    out = os.path.join(args.scratch, "run")
    cmd = [args.prune, "--config", os.path.join(REPO, "configs", "sts_embed.yaml"), "--model", folder, "--out", out,
           *RUN_FLAGS]
    run(cmd)
    s = json.load(open(os.path.join(out, "summary.json"), encoding="utf-8"))
    ok = True
    steps = s["steps"]
    ok &= check(set(steps) == {"searched", "rearranged", "tuned", "recovered"}, f"four steps scored: {sorted(steps)}")
    best = max(v["select_cosine_to_teacher"] for v in steps.values())
    ok &= check(steps[s["chosen"]]["select_cosine_to_teacher"] == best,
                f"the choice ({s['chosen']}) is the closest to the teacher on the selection slice {s['select_split']} "
                f"({best:.4f})")
    ok &= check(s["structure"]["flops_kept"] <= 0.5 + 1e-9, f"FLOPs kept {s['structure']['flops_kept']:.4f} <= 0.5")
    ok &= check(s["recovery"]["last_loss"] < s["recovery"]["first_loss"],
                f"the recovery lowers the distillation loss: {s['recovery']['first_loss']:.4g} -> "
                f"{s['recovery']['last_loss']:.4g}")
    export = os.path.join(out, "model")
    pairs = dev_pairs()
    both = [p[0] for p in pairs] + [p[1] for p in pairs]
    texts = os.path.join(args.scratch, "both.txt")
    with open(texts, "w", encoding="utf-8") as f:
        f.write("\n".join(both) + "\n")
    npy = os.path.join(args.scratch, "ours.npy")
    run([args.prune, "embed", "--model", export, "--input", texts, "--output", npy])
    student = st.SentenceTransformer(export, device="cpu", trust_remote_code=True)
    ref = student.encode(both, batch_size=16, convert_to_numpy=True)
    err = float(np.abs(np.load(npy) - ref).max())
    ok &= check(err <= 1e-5, f"the export in sentence-transformers: max |prune embed - encode| {err:.2e}")
    teacher = st.SentenceTransformer(folder, device="cpu").encode(both, batch_size=16, convert_to_numpy=True)
    cos = float(np.mean(np.sum(ref * teacher, 1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(teacher, axis=1))))
    have = s["final"]["mean_cosine_to_teacher"]
    ok &= check(abs(cos - have) <= 1e-5, f"mean cosine to the teacher {have:.6f}, sentence-transformers {cos:.6f}")
    res = os.path.join(args.scratch, "eval.json")
    run([args.prune, "eval", "--model", export, "--task", "stsb", "--max-examples", "200", "--output", res])
    got = 100 * json.load(open(res, encoding="utf-8"))["metrics"]["cosine_spearman"]
    ok &= check(abs(got - s["final"]["spearman"]) <= 1e-4,
                f"prune eval of the export {got:.4f} = the run's reported {s['final']['spearman']:.4f}")
    again = run(cmd)
    s2 = json.load(open(os.path.join(out, "summary.json"), encoding="utf-8"))
    ok &= check("resuming" in again.stderr and "gradients" not in again.stderr and "recover]" not in again.stderr,
                "the same command resumes: nothing searched or recovered again")
    ok &= check(s2["steps"] == s["steps"] and s2["chosen"] == s["chosen"], "and reports the same steps and choice")
    print("all checks passed" if ok else "some checks FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
