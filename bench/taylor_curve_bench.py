#!/usr/bin/env python3
"""Python baseline for head ranking + pruning curve: the Hugging Face `run_bertology.py` loop.

Reproduces the bertology research example (examples/research_projects/bertology in transformers) on
HF transformers 4.40.2 + Debian's torch 1.13, as the reference our C++ ranking/curve is timed against:

  1. Ranking (first-order Taylor / head-mask gradient, Michel et al. 2019): the first --rank-examples
     SST-2 train examples, padded to a FIXED --max-seq-len (padding="max_length", as run_bertology),
     batches of --batch, model.eval(), head_mask = ones(L, H) with requires_grad; per batch the mean
     cross-entropy of the gold label is back-propagated and |head_mask.grad| is added to the importance.
     As in run_bertology the model parameters keep requires_grad (their .grad is computed and
     accumulated too; that cost is part of the baseline). Then per-layer L2 normalisation.
  2. Curve: prune 0%, 10%, ..., 100% of the L*H heads in ascending importance (global ranking,
     round(p/100 * L*H) heads) via HF's head_mask argument and evaluate SST-2 dev accuracy (all
     examples, fixed padding to --max-seq-len, batch 64, no grad) at each point.

Tokenisation and model loading happen before the timers (run_bertology also tokenises up front).

Usage: $VENV/bin/python bench/taylor_curve_bench.py [--rank-examples 512] [--batch 32] [--max-seq-len 64]
           [--threads 2] [--dev-examples 0] [--model runs/sst2/finetune/best] [--data-root ../shared/data] [--out FILE.json]
"""
import argparse
import json
import os
import time

os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")  # Debian's OpenBLAS mis-detects this CPU otherwise

import torch  # noqa: E402
from transformers import BertForSequenceClassification, BertTokenizerFast  # noqa: E402


def read_tsv(path, limit=None):
    """SST-2 TSV with header "sentence\\tlabel" -> (sentences, labels)."""
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    if limit is not None:
        rows = rows[:limit]
    return [r[0] for r in rows], [int(r[1]) for r in rows]


def encode(tok, sentences, max_len):
    # Fixed-length padding, as run_bertology's GLUE feature conversion does.
    return tok(sentences, padding="max_length", truncation=True, max_length=max_len, return_tensors="pt")


def compute_importance(model, enc, labels, batch):
    """run_bertology's compute_heads_importance (importance part), gold-label CE loss."""
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    importance = torch.zeros(L, H)
    head_mask = torch.ones(L, H, requires_grad=True)
    ce = torch.nn.CrossEntropyLoss()  # mean over the batch
    for s in range(0, labels.numel(), batch):
        out = model(input_ids=enc["input_ids"][s:s + batch], token_type_ids=enc["token_type_ids"][s:s + batch],
                    attention_mask=enc["attention_mask"][s:s + batch], head_mask=head_mask)
        loss = ce(out.logits, labels[s:s + batch])
        loss.backward()  # parameters get (accumulated) gradients too, as in run_bertology
        importance += head_mask.grad.abs().detach()
        head_mask.grad = None  # batch-level |grad| per batch
    # Layer-wise L2 normalisation (run_bertology: exponent 2, +1e-20 against division by zero).
    norm = importance.pow(2).sum(-1).pow(0.5)
    return importance / (norm.unsqueeze(-1) + 1e-20)


@torch.no_grad()
def accuracy(model, enc, labels, head_mask, batch=64):
    correct = 0
    for s in range(0, labels.numel(), batch):
        logits = model(input_ids=enc["input_ids"][s:s + batch], token_type_ids=enc["token_type_ids"][s:s + batch],
                       attention_mask=enc["attention_mask"][s:s + batch], head_mask=head_mask).logits
        correct += (logits.argmax(-1) == labels[s:s + batch]).sum().item()
    return correct / labels.numel()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rank-examples", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--eval-batch", type=int, default=64)
    ap.add_argument("--dev-examples", type=int, default=0, help="first N dev examples (0 = all; for tests)")
    ap.add_argument("--max-seq-len", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default="runs/sst2/finetune/best")
    ap.add_argument("--data-root", default="../shared/data")
    ap.add_argument("--out", default=None, help="write timings, importance and curve as JSON")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(42)

    sst2 = os.path.join(args.data_root, "glue", "SST-2")
    tok = BertTokenizerFast.from_pretrained(args.model)
    model = BertForSequenceClassification.from_pretrained(args.model, attn_implementation="eager")
    model.eval()
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    tr_sent, tr_lab = read_tsv(os.path.join(sst2, "train.tsv"), args.rank_examples)
    dv_sent, dv_lab = read_tsv(os.path.join(sst2, "dev.tsv"), args.dev_examples or None)
    tr_enc, tr_lab = encode(tok, tr_sent, args.max_seq_len), torch.tensor(tr_lab)
    dv_enc, dv_lab = encode(tok, dv_sent, args.max_seq_len), torch.tensor(dv_lab)

    # 1. Ranking.
    t0 = time.perf_counter()
    importance = compute_importance(model, tr_enc, tr_lab, args.batch)
    t_rank = time.perf_counter() - t0

    # 2. Curve: heads sorted by ascending importance (global), stable sort for deterministic ties.
    t1 = time.perf_counter()
    order = torch.sort(importance.flatten(), stable=True).indices
    curve = []
    for p in range(0, 101, 10):
        n = int(round(p / 100 * L * H))
        mask = torch.ones(L * H)
        mask[order[:n]] = 0.0
        acc = accuracy(model, dv_enc, dv_lab, mask.view(L, H), args.eval_batch)
        curve.append({"percent": p, "pruned": n, "accuracy": acc})
        print(f"pruned {p:3d}% ({n:2d}/{L * H} heads): dev accuracy {acc:.4f}", flush=True)
    t_curve = time.perf_counter() - t1

    total = t_rank + t_curve
    print(f"taylor+curve total: {total:.2f} s (ranking {t_rank:.2f} s, curve {t_curve:.2f} s)")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"seconds_total": total, "seconds_ranking": t_rank, "seconds_curve": t_curve,
                       "importance": importance.tolist(), "curve": curve}, f, indent=1)


if __name__ == "__main__":
    main()
