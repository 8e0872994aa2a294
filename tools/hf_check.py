#!/usr/bin/env python3
"""Loads a model folder written by headprune with Hugging Face transformers and compares its logits
with reference logits, so tests prove that our exports load in HF (pruned_heads included).

Usage: hf_check.py MODEL_DIR GOLDEN.h5 [--tol 1e-4] [--head-mask-key KEY]
  GOLDEN.h5 holds input_ids, attention_mask, token_type_ids and the expected `logits` (or KEY).
Exit 0 when max |HF - expected| <= tol, 1 otherwise (the difference is printed either way).
Pinned: transformers==4.40.2 on Debian's python3-torch 1.13 (scripts/setup_python.sh).
"""
import argparse
import sys

import h5py
import torch
from transformers import BertForSequenceClassification


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("golden")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--logits-key", default="logits")
    args = ap.parse_args()
    with h5py.File(args.golden, "r") as f:
        ids = torch.tensor(f["input_ids"][()])
        mask = torch.tensor(f["attention_mask"][()])
        types = torch.tensor(f["token_type_ids"][()])
        want = torch.tensor(f[args.logits_key][()])
    model = BertForSequenceClassification.from_pretrained(args.model_dir)
    model.eval()
    with torch.no_grad():
        got = model(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
    diff = (got.double() - want.double()).abs().max().item()
    print(f"hf_check: {args.model_dir}: max |HF - expected| = {diff:.3g} (tol {args.tol:g})")
    return 0 if diff <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
