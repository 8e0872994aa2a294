#!/usr/bin/env python3
"""headprune's int8 scheme simulated in PyTorch on a Hugging Face folder, to choose SmoothQuant's α.

Weights: symmetric int8 per output channel. Activations: uint8 per row with a zero point (core/kernels/quantize.h).
With smoothing, input channel k of each linear is divided by s_k = max|x_k|^α / max_n |w_nk|^(1-α) (max|x_k| over
the first --calibrate train examples, padding excluded) and the weight's column k multiplied by it. Prints, per α,
the dev metric and the RMS difference of the logits from fp32 over the dev set. The classifier stays fp32.

    ~/.cache/headprune/venv/bin/python bench/int8_smoothing_sim.py --model runs/mrpc_ft/best --task mrpc
"""
import argparse
import csv
import os

import numpy as np
import torch
from scipy.stats import spearmanr
from transformers import BertForSequenceClassification, BertTokenizer

TASKS = {  # folder, text columns, label column, metric
    "mrpc": ("MRPC", (3, 4), 0, "f1"),
    "sst2": ("SST-2", (0, None), 1, "accuracy"),
    "stsb": ("STS-B", (7, 8), 9, "spearman"),
}


def read(root, task, split, n=None):
    folder, (a, b), y, _ = TASKS[task]
    rows = []
    with open(os.path.join(root, "glue", folder, split + ".tsv"), encoding="utf-8-sig") as f:
        r = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        next(r)
        for row in r:
            rows.append((row[a], row[b] if b is not None else None, float(row[y])))
    return rows[:n] if n else rows


def quantize_rows(x):
    lo = x.amin(-1, keepdim=True).clamp(max=0)
    hi = x.amax(-1, keepdim=True).clamp(min=0)
    s = (hi - lo) / 255
    s = torch.where(s == 0, torch.ones_like(s), s)
    z = torch.round(-lo / s)
    return (torch.clamp(torch.round(x / s) + z, 0, 255) - z) * s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--task", required=True, choices=sorted(TASKS))
    ap.add_argument("--data-root", default=os.environ.get("HEADPRUNE_DATA", "../shared/data"))
    ap.add_argument("--calibrate", type=int, default=512)
    ap.add_argument("--alphas", type=float, nargs="+", default=[0.3, 0.4, 0.5, 0.6])
    args = ap.parse_args()
    torch.manual_seed(0)
    tok = BertTokenizer.from_pretrained(args.model)
    model = BertForSequenceClassification.from_pretrained(args.model).eval()
    dev = read(args.data_root, args.task, "dev")
    train = read(args.data_root, args.task, "train", args.calibrate)

    def batches(rows, size=32):
        for i in range(0, len(rows), size):
            part = rows[i:i + size]
            pairs = [r[1] for r in part] if part[0][1] is not None else None
            yield tok([r[0] for r in part], pairs, padding=True, truncation=True, max_length=128, return_tensors="pt")

    linears = [m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and "classifier" not in n]
    weights = {m: m.weight.data.clone() for m in linears}
    amax = {m: torch.zeros(m.in_features) for m in linears}
    mask = {}

    def record(m, inp):
        x = inp[0][mask["m"].bool()] if inp[0].dim() == 3 else inp[0]
        amax[m] = torch.maximum(amax[m], x.abs().reshape(-1, x.shape[-1]).amax(0))

    hooks = [m.register_forward_pre_hook(record) for m in linears]
    with torch.no_grad():
        for enc in batches(train):
            mask["m"] = enc["attention_mask"]
            model(**enc)
    for h in hooks:
        h.remove()

    def logits_at(alpha):  # alpha None: fp32; 0: dynamic int8 without smoothing
        hooks = []
        for m in linears:
            w = weights[m]
            if alpha is None:
                m.weight.data = w.clone()
                continue
            s = (amax[m].clamp(min=1e-5) ** alpha / w.abs().amax(0).clamp(min=1e-5) ** (1 - alpha)
                 if alpha > 0 else torch.ones(m.in_features))
            ws = w * s
            scale = ws.abs().amax(1, keepdim=True).clamp(min=1e-30) / 127
            m.weight.data = torch.round(ws / scale) * scale
            hooks.append(m.register_forward_pre_hook(lambda mod, inp, s=s: (quantize_rows(inp[0] / s),)))
        with torch.no_grad():
            out = torch.cat([model(**enc).logits for enc in batches(dev)])
        for h in hooks:
            h.remove()
        return out

    y = np.array([r[2] for r in dev])

    def metric(logits):
        if args.task == "stsb":
            return 100 * spearmanr(logits[:, 0].numpy(), y).correlation
        p = logits.argmax(-1).numpy()
        if args.task == "sst2":
            return 100 * (p == y).mean()
        tp = ((p == 1) & (y == 1)).sum()
        return 100 * 2 * tp / (2 * tp + ((p == 1) & (y == 0)).sum() + ((p == 0) & (y == 1)).sum())

    ref = logits_at(None)
    print(f"{args.task} fp32: {TASKS[args.task][3]} {metric(ref):.2f}")
    for alpha in [0.0] + args.alphas:
        q = logits_at(alpha)
        rms = (q - ref).pow(2).mean().sqrt().item()
        name = "dynamic" if alpha == 0 else f"alpha {alpha:.2f}"
        print(f"{args.task} int8 {name}: {TASKS[args.task][3]} {metric(q):.2f}  RMS logit error {rms:.4f}", flush=True)


if __name__ == "__main__":
    main()
