#!/usr/bin/env python3
"""Python reference for the fine-tuning throughput benchmark (bench/train_bench.cpp).

The same loop as `prune train` in HF transformers 4.40.2 on Debian's torch 1.13 (same OpenBLAS):
BertForSequenceClassification from the all-MiniLM-L6-v2 folder, SST-2 train, batch 32, max_seq_len 64,
dynamic padding per batch, AdamW (decay 0.01, none on biases/LayerNorm), linear warm-up/decay,
gradient clipping 1.0, dropout on. Prints examples/s over the timed steps (after warm-up steps).

Usage: $VENV/bin/python bench/train_bench.py [--steps 60] [--warmup 5] [--threads 2] [--model DIR]
"""
import argparse
import os
import random
import time

os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")  # Debian's OpenBLAS mis-detects this CPU otherwise

import torch  # noqa: E402
from transformers import BertForSequenceClassification, BertTokenizerFast, get_linear_schedule_with_warmup  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-seq-len", type=int, default=64)
    ap.add_argument("--model", default="checkpoints/all-MiniLM-L6-v2")
    ap.add_argument("--data", default="../shared/data/glue/SST-2/train.tsv")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(42)
    random.seed(42)
    with open(args.data, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    random.shuffle(rows)
    tok = BertTokenizerFast.from_pretrained(args.model)
    model = BertForSequenceClassification.from_pretrained(args.model, num_labels=2)
    model.train()
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=5e-5, eps=1e-8)
    total = args.steps + args.warmup
    sched = get_linear_schedule_with_warmup(opt, int(0.1 * total), total)
    seen = 0
    start = None
    for step in range(total):
        batch = rows[step * args.batch:(step + 1) * args.batch]
        enc = tok([r[0] for r in batch], truncation=True, max_length=args.max_seq_len, padding=True,
                  return_tensors="pt")
        labels = torch.tensor([int(r[1]) for r in batch])
        if step == args.warmup:
            start = time.perf_counter()
            seen = 0
        loss = model(**enc, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        seen += len(batch)
    dt = time.perf_counter() - start
    print(f"train hf-python sst2 B={args.batch} max_seq_len={args.max_seq_len} threads={args.threads}: "
          f"{seen} examples in {dt:.2f} s, {seen / dt:.1f} examples/s")


if __name__ == "__main__":
    main()
