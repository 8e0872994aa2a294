#!/usr/bin/env python3
# Python reference for bench/forward_bench.cpp: the same fp32 matmul shapes and the same BERT forward
# (random BERT-base weights, B=32, S=128, eval mode, no grad) in Hugging Face transformers on
# Debian's torch 1.13, which calls the same OpenBLAS as our LibTorch. Prints lines in the same format.
# Run: /root/.cache/headprune/venv/bin/python bench/forward_bench.py [--reps 5] [--threads 2]
# Pinned: transformers 4.40.2, torch 1.13 (Debian python3-torch).
import argparse
import os
import statistics
import time

# Debian's OpenBLAS mis-detects some CPUs (Sapphire Rapids as Prescott, ~5x slower); it reads this at
# load time, so it must be set before torch is imported. core/kernels/blas.cpp does the same for our programs.
os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")

import torch  # noqa: E402
from transformers import BertConfig, BertForSequenceClassification, BertModel  # noqa: E402


def median_seconds(f, warmup, reps):
    for _ in range(warmup):
        f()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def forward_flops(cfg, B, S):
    # Same count as eval/flops.cpp: 2 FLOPs per multiply-add of the matrix products only.
    D, I, L = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    attn = 2.0 * S * D * D * 3 + 2.0 * S * S * D * 2 + 2.0 * S * D * D
    per_seq = L * (attn + 2.0 * S * D * I * 2) + 2.0 * D * D + 2.0 * D * 2
    return per_seq * B


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default="checkpoints/all-MiniLM-L6-v2")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"runtime: torch {torch.__version__} | OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']} "
          f"| threads {torch.get_num_threads()}")
    B, S = args.batch, args.seq
    M = B * S

    peak = 0.0
    with torch.no_grad():
        for K, N in [(768, 768), (768, 3072), (3072, 768), (768, 2304)]:
            a, b = torch.randn(M, K), torch.randn(K, N)
            t = median_seconds(lambda: torch.mm(a, b), args.warmup + 1, args.reps)
            g = 2.0 * M * K * N / t / 1e9
            peak = max(peak, g)
            print(f"matmul [{M},{K}]x[{K},{N}]: {t:.4f} s, {g:.1f} GFLOP/s")
    print(f"matmul peak: {peak:.1f} GFLOP/s")

    torch.manual_seed(0)
    base = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                      intermediate_size=3072, attn_implementation="eager")
    models = [("bert-base BertModel", BertModel(base, add_pooling_layer=True)),
              ("bert-base BertForSequenceClassification", BertForSequenceClassification(base))]
    if os.path.exists(os.path.join(args.model, "config.json")):
        models.append((os.path.basename(os.path.normpath(args.model)) + " BertModel",
                       BertModel.from_pretrained(args.model, attn_implementation="eager")))
    for label, model in models:
        model.eval()
        cfg = model.config
        ids = torch.randint(1000, cfg.vocab_size, (B, S))
        types = torch.zeros(B, S, dtype=torch.long)
        mask = torch.ones(B, S, dtype=torch.long)
        with torch.no_grad():
            t = median_seconds(lambda: model(input_ids=ids, token_type_ids=types, attention_mask=mask),
                               args.warmup, args.reps)
        flops = forward_flops(cfg, B, S)
        g = flops / t / 1e9
        print(f"forward {label} B={B} S={S}: {t:.3f} s, {g:.1f} GFLOP/s, {100 * g / peak:.0f}% of matmul peak "
              f"({flops / 1e9:.1f} GFLOP per forward)")


if __name__ == "__main__":
    main()
