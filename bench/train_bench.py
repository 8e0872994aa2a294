#!/usr/bin/env python3
"""Python reference for the fine-tuning throughput benchmark (bench/train_bench.cpp).

The same loop as `prune train` in HF transformers 4.40.2 on Debian's torch 1.13 (same OpenBLAS):
BertForSequenceClassification from the all-MiniLM-L6-v2 folder, SST-2 train, batch 32, max_seq_len 64,
dynamic padding per batch, AdamW (decay 0.01, none on biases/LayerNorm), linear warm-up/decay,
gradient clipping 1.0, dropout on. Prints examples/s over the timed steps (after warm-up steps).
--bf16: the steps under torch.cpu.amp.autocast(dtype=torch.bfloat16), as the Trainer's --bf16 runs them on a CPU;
--group-by-length: the batches in the Trainer's --group_by_length order (get_length_grouped_indices).

Usage: $VENV/bin/python bench/train_bench.py [--steps 60] [--warmup 5] [--threads 2] [--model DIR] [--bf16]
       [--group-by-length]
"""
import argparse
import os
import random
import time

os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")  # Debian's OpenBLAS mis-detects this CPU otherwise

import torch  # noqa: E402
from transformers import BertForSequenceClassification, BertTokenizerFast, get_linear_schedule_with_warmup  # noqa: E402
from transformers.trainer_pt_utils import get_length_grouped_indices  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-seq-len", type=int, default=64)
    ap.add_argument("--model", default="checkpoints/all-MiniLM-L6-v2")
    ap.add_argument("--data", default="../shared/data/glue/SST-2/train.tsv")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--group-by-length", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(42)
    random.seed(42)
    with open(args.data, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    tok = BertTokenizerFast.from_pretrained(args.model)
    total = args.steps + args.warmup
    rows = rows[:total * args.batch]  # the first rows of the file, as train_bench.cpp takes them, then shuffled
    random.shuffle(rows)
    if args.group_by_length:
        lengths = [min(len(ids), args.max_seq_len) for ids in tok([r[0] for r in rows])["input_ids"]]
        rows = [rows[i] for i in get_length_grouped_indices(lengths, args.batch)]
    model = BertForSequenceClassification.from_pretrained(args.model, num_labels=2)
    model.train()
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=5e-5, eps=1e-8)
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
        with torch.cpu.amp.autocast(enabled=args.bf16, dtype=torch.bfloat16):
            loss = model(**enc, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        seen += len(batch)
    dt = time.perf_counter() - start
    how = ("bf16 autocast" if args.bf16 else "fp32") + (" length-grouped" if args.group_by_length else "")
    print(f"train hf-python sst2 B={args.batch} max_seq_len={args.max_seq_len} threads={args.threads} {how}: "
          f"{seen} examples in {dt:.2f} s, {seen / dt:.1f} examples/s")


if __name__ == "__main__":
    main()
