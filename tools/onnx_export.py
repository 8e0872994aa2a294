#!/usr/bin/env python3
"""Writes MODEL_DIR/model.onnx from a model folder headprune exported (slimmed or not), through the
reference Python's torch.onnx (transformers loads the folder, re-pruning from config.pruned_heads), checks
it in ONNX Runtime against headprune's own logits, and optionally times it.

Usage: onnx_export.py MODEL_DIR REFERENCE.h5 [--out FILE] [--tol 1e-4] [--time OTHER_DIR] [--seq 64]
  REFERENCE.h5 holds input_ids, attention_mask, token_type_ids and headprune's `logits` for them.
  --time OTHER_DIR: also export OTHER_DIR (e.g. the unpruned model) to a temporary file and print the
  median ONNX Runtime latency of both at batch 1 and 32 (random ids, sequence --seq).
Exit 0 when max |ONNX Runtime - headprune| <= tol, 1 otherwise; 77 when onnxruntime is not installed.
The graph has dynamic batch and sequence axes (inputs input_ids, attention_mask, token_type_ids; output
logits), opset 14.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import h5py
import numpy as np
import torch
from transformers import AutoModelForSequenceClassification, BertForSequenceClassification

try:
    import onnxruntime as ort
except ImportError:
    print("SKIP: onnxruntime is not installed (scripts/setup_python.sh installs it)")
    sys.exit(77)

NAMES = ["input_ids", "attention_mask", "token_type_ids"]


def load(model_dir: str):
    """A folder with per-layer FFN widths (config.json's intermediate_sizes) loads through headprune's
    modeling file beside it; any other through transformers' own BERT."""
    with open(os.path.join(model_dir, "config.json")) as f:
        if "intermediate_sizes" in json.load(f):
            return AutoModelForSequenceClassification.from_pretrained(model_dir, trust_remote_code=True)
    return BertForSequenceClassification.from_pretrained(model_dir)


def export(model_dir: str, path: str) -> None:
    model = load(model_dir).eval()
    model.config.return_dict = False
    dummy = tuple(torch.ones(2, 8, dtype=torch.long) for _ in NAMES)
    axes = {n: {0: "batch", 1: "sequence"} for n in NAMES}
    axes["logits"] = {0: "batch"}
    with torch.no_grad():
        torch.onnx.export(model, dummy, path, input_names=NAMES, output_names=["logits"], dynamic_axes=axes,
                          opset_version=14, do_constant_folding=True)


def session(path: str) -> "ort.InferenceSession":
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = os.cpu_count() or 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def latency_ms(sess, batch: int, seq: int, vocab: int, reps: int = 15) -> float:
    rng = np.random.default_rng(0)
    feed = {"input_ids": rng.integers(1000, vocab, size=(batch, seq), dtype=np.int64),
            "attention_mask": np.ones((batch, seq), dtype=np.int64),
            "token_type_ids": np.zeros((batch, seq), dtype=np.int64)}
    sess.run(None, feed)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        sess.run(None, feed)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("reference")
    ap.add_argument("--out")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--time")
    ap.add_argument("--seq", type=int, default=64)
    args = ap.parse_args()
    out = args.out or os.path.join(args.model_dir, "model.onnx")
    export(args.model_dir, out)
    sess = session(out)
    with h5py.File(args.reference, "r") as f:
        feed = {n: f[n][()].astype(np.int64) for n in NAMES}
        want = f["logits"][()]
    got = sess.run(None, feed)[0]
    diff = float(np.abs(got - want).max())
    print(f"onnx: wrote {out}; max |ONNX Runtime - headprune| = {diff:.3g} over {want.shape[0]} examples (tol {args.tol})")
    if args.time:
        vocab = BertForSequenceClassification.config_class.from_pretrained(args.model_dir).vocab_size
        with tempfile.TemporaryDirectory() as tmp:
            other = os.path.join(tmp, "other.onnx")
            export(args.time, other)
            base = session(other)
            for batch in (1, 32):
                a, b = latency_ms(base, batch, args.seq, vocab), latency_ms(sess, batch, args.seq, vocab)
                print(f"onnx latency batch {batch} seq {args.seq}: {args.time} {a:.1f} ms, {args.model_dir} {b:.1f} ms, "
                      f"speedup x{a / b:.2f}")
    return 0 if diff <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
