#!/usr/bin/env python3
"""SentenceTransformer(model).encode(lines of a file) on the CPU with N threads, written as .npy: the yardstick of
`prune embed` in bench/embed_speed.sh (#59). Usage: st_encode.py MODEL INPUT OUTPUT.npy [--batch 32] [--threads 2]"""
import argparse
import os

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("input")
ap.add_argument("output")
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--threads", type=int, default=2)
args = ap.parse_args()
os.environ["HF_HUB_OFFLINE"] = "1"
torch.set_num_threads(args.threads)
with open(args.input, encoding="utf-8") as f:
    lines = [line.rstrip("\n") for line in f if line.strip()]
model = SentenceTransformer(args.model, device="cpu")
np.save(args.output, model.encode(lines, batch_size=args.batch, convert_to_numpy=True))
