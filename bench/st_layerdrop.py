#!/usr/bin/env python3
"""sentence-transformers' own compression recipe, side by side with headprune's embedding run (#59).

The recipe of sentence-transformers' examples/training/distillation/model_distillation_layer_reduction.py: the
student is the teacher with only some of its layers kept (here 3 of MiniLM's 6: layers 0, 2, 4 — 50% of the
encoder's FLOPs), trained by MSE between its sentence embedding and the teacher's. It runs on what headprune's
`prune --config configs/sts_embed.yaml` distils on — STS-B's train sentences less the held-out pairs and every pair
that shares a sentence with them (core/data/holdout.h), or exactly the run's own list (--sentences) — for the same
steps, batch, learning rate, warm-up, weight decay and clipping, and its step is chosen the same way (the mean cosine
to the teacher on the held-out pairs' sentences). Prints one JSON line: STS-B dev cosine Spearman of the teacher,
of the student before training, at its chosen step and at the end.

Usage: ~/.cache/headprune/venv/bin/python bench/st_layerdrop.py [--model DIR] [--data DIR] [--keep 0,2,4]
       [--sentences RUN_DIR/state/embedding/distill_sentences.txt] [--steps 1000] [--batch 32] [--lr 1e-4]
       [--threads 2] [--seed 42]
"""
import argparse
import copy
import csv
import json
import pathlib
import random
import sys
import time

import numpy as np
import torch
from scipy.stats import spearmanr
from sentence_transformers import SentenceTransformer


def read_stsb(path):
    with open(path, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    head = rows[0]
    a, b, s = head.index("sentence1"), head.index("sentence2"), head.index("score")
    return [(r[a], r[b], float(r[s])) for r in rows[1:] if len(r) == len(head)]


def norm(t):
    return " ".join(t.split())


def split_held(rows, n):
    """The pairs rule of core/data/holdout.h: the last n pairs held, the rest less pairs sharing a sentence."""
    held = rows[len(rows) - n:]
    shared = {norm(t) for r in held for t in r[:2]}
    rest = [r for r in rows[:len(rows) - n] if norm(r[0]) not in shared and norm(r[1]) not in shared]
    return held, rest


def singles(rows):
    seen, out = set(), []
    for r in rows:
        for t in r[:2]:
            if t and t not in seen:
                seen.add(t)
                out.append(t)
    return out


def spearman(model, pairs):
    e1 = model.encode([p[0] for p in pairs], batch_size=64, convert_to_tensor=True, normalize_embeddings=True)
    e2 = model.encode([p[1] for p in pairs], batch_size=64, convert_to_tensor=True, normalize_embeddings=True)
    return 100 * spearmanr((e1 * e2).sum(-1).cpu().numpy(), [p[2] for p in pairs]).correlation


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="checkpoints/all-MiniLM-L6-v2")
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--keep", default="0,2,4")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=float, default=0.06)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--held", type=int, default=574, help="held-out pairs (a tenth of STS-B train, as headprune)")
    ap.add_argument("--sentences", help="the sentences to distil on, one per line: a headprune run's "
                    "RUN_DIR/state/embedding/distill_sentences.txt (default: STS-B train less the held-out pairs)")
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    random.seed(a.seed), np.random.seed(a.seed), torch.manual_seed(a.seed)
    root = pathlib.Path(a.data) / "glue" / "STS-B"
    held, rest = split_held(read_stsb(root / "train.tsv"), a.held)
    dev = read_stsb(root / "dev.tsv")
    sentences, held_sentences = singles(rest), singles(held)
    if a.sentences:
        with open(a.sentences, encoding="utf-8") as f:
            sentences = [line.rstrip("\n") for line in f]
    t0 = time.time()

    teacher = SentenceTransformer(a.model, device="cpu")
    teacher.eval()
    with torch.no_grad():
        target = teacher.encode(sentences, batch_size=64, convert_to_tensor=True)
        held_target = teacher.encode(held_sentences, batch_size=64, convert_to_tensor=True)
    result = {"sentences": len(sentences), "teacher_spearman": spearman(teacher, dev)}

    student = copy.deepcopy(teacher)
    bert = student[0].auto_model
    keep = [int(k) for k in a.keep.split(",")]
    bert.encoder.layer = torch.nn.ModuleList([bert.encoder.layer[k] for k in keep])
    bert.config.num_hidden_layers = len(keep)
    result["layers_kept"] = keep
    result["student_spearman_before"] = spearman(student, dev)

    opt = torch.optim.AdamW(student.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    warm = max(1, int(a.warmup * a.steps))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else max(0.0, (a.steps - s) / max(1, a.steps - warm)))
    mse = torch.nn.MSELoss()
    order, at = [], 0
    best = (-1.0, 0, None)
    for step in range(1, a.steps + 1):
        if at + a.batch > len(order):
            order, at = random.sample(range(len(sentences)), len(sentences)), 0
        idx = order[at:at + a.batch]
        at += a.batch
        student.train()
        features = student.tokenize([sentences[i] for i in idx])
        loss = mse(student(features)["sentence_embedding"], target[idx])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), a.clip)
        opt.step()
        sched.step()
        if step % a.eval_every == 0 or step == a.steps:
            student.eval()
            with torch.no_grad():
                e = student.encode(held_sentences, batch_size=64, convert_to_tensor=True)
            cos = torch.nn.functional.cosine_similarity(e, held_target).mean().item()
            print(f"step {step}: loss {loss.item():.5f}, held-out cosine to the teacher {cos:.4f}", file=sys.stderr)
            if cos > best[0]:
                best = (cos, step, copy.deepcopy(student.state_dict()))
    result["student_spearman_end"] = spearman(student, dev)
    student.load_state_dict(best[2])
    result.update({"chosen_step": best[1], "chosen_cosine_to_teacher": best[0],
                   "student_spearman_chosen": spearman(student, dev), "seconds": round(time.time() - t0, 1)})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
