#!/usr/bin/env python3
"""PyTorch's side of bench/gpu_step_bench.cpp: the same rows in transformers on the same device.

BertForSequenceClassification of all-MiniLM-L6-v2's and BERT-base's shapes (random weights), a training step at
b32 x 128 and x 64 (bf16 autocast, cross-entropy, backward, clip_grad_norm_ 1.0, AdamW fused on a GPU, linear
schedule, dropout on) and the forward in fp32 and bf16 (no gradient) at b32 x 128 and b1 x 128. Eager, and with
--compile also torch.compile'd. Each row: the median of --steps timed calls after --warmup, synchronised around
each; printed as "row MODEL pytorch-eager-train-bf16 b32x128: ... ms median (min, max) of N" like the C++ bench.
--compile runs the torch.compile'd rows instead of the eager ones.

Usage: python3 bench/gpu_step_bench.py [--device cuda] [--models minilm,base] [--compile] [--steps 20]
"""
import argparse
import statistics
import time

import torch
from transformers import BertConfig, BertForSequenceClassification

SHAPES = {"minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536),
          "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)}


def timed(f, device, warmup, steps):
    for _ in range(warmup):
        f()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    ms = []
    for _ in range(steps):
        t = time.perf_counter()
        f()
        sync()
        ms.append(1e3 * (time.perf_counter() - t))
    return sorted(ms)[len(ms) // 2], min(ms), max(ms)


def row(model, what, b, s, stats, steps):
    print(f"row {model} {what} b{b}x{s}: {stats[0]:.3f} ms median (min {stats[1]:.3f}, max {stats[2]:.3f}) of {steps}",
          flush=True)


def build(name, device):
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, num_labels=2, **SHAPES[name])
    return BertForSequenceClassification(cfg).to(device)


def train_rows(name, device, args, mode):
    for s in (128, 64):
        b = 32
        model = build(name, device).train()
        fused = device.type == "cuda"
        opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01, fused=fused)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: max(0.0, 1 - k / 1000))
        fwd = torch.compile(model) if mode == "compile" else model
        ids = torch.randint(1000, 30522, (b, s), device=device)
        mask = torch.ones(b, s, dtype=torch.long, device=device)
        labels = torch.randint(0, 2, (b,), device=device)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=torch.bfloat16):
                logits = fwd(input_ids=ids, attention_mask=mask).logits
            torch.nn.functional.cross_entropy(logits.float(), labels).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()

        row(name, f"pytorch-{mode}-train-bf16", b, s, timed(step, device, args.warmup, args.steps), args.steps)


def forward_rows(name, device, args, mode):
    model = build(name, device).eval()
    fwd = torch.compile(model) if mode == "compile" else model
    for bf16 in (False, True):
        for b in (32, 1):
            ids = torch.randint(1000, 30522, (b, 128), device=device)
            mask = torch.ones(b, 128, dtype=torch.long, device=device)

            def call():
                with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                    fwd(input_ids=ids, attention_mask=mask)

            what = f"pytorch-{mode}-forward-{'bf16' if bf16 else 'fp32'}"
            row(name, what, b, 128, timed(call, device, args.warmup, args.steps), args.steps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--models", default="minilm,base")
    ap.add_argument("--compile", action="store_true", help="the torch.compile rows instead (a minute of compiling)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    import transformers
    print(f"runtime: torch {torch.__version__}, transformers {transformers.__version__}, {name}", flush=True)
    for model in args.models.split(","):
        for mode in (["compile"] if args.compile else ["eager"]):
            train_rows(model, device, args, mode)
            forward_rows(model, device, args, mode)


if __name__ == "__main__":
    main()
