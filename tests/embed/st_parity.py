#!/usr/bin/env python3
"""`prune embed` against sentence-transformers itself (#59).

Builds tiny sentence-transformers folders with the package from the tiny BERT (tests/data/golden/tiny_bert) — one
per pooling mode (cls, max, mean, mean_sqrt_len, weightedmean, lasttoken) and a two-mode one (mean + max), each
with and without Normalize — and takes the real all-MiniLM-L6-v2 when it is linked (checkpoints/); for each, the
embeddings `prune embed` writes (.npy, batches of 7 so that rows are padded) must equal
SentenceTransformer(folder).encode() of the same sentences (SST-2 dev, varied lengths) within 1e-5. The .jsonl and
.h5 outputs of one folder must hold the same numbers. Exit 77 (CTest: skipped) without sentence-transformers.

Usage: $VENV/bin/python tests/embed/st_parity.py --prune build/bin/prune --scratch DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(REPO, "tests", "data", "golden", "tiny_bert")
MINILM = os.path.join(REPO, "checkpoints", "all-MiniLM-L6-v2")
SST2_DEV = os.path.join(REPO, "..", "shared", "data", "glue", "SST-2", "dev.tsv")
MODES = ["cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken", "mean+max"]
TOL = 1e-5


def sentences(n=40):
    with open(SST2_DEV, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t")[0] for line in f][1:]
    # Short and long ones, so that batches mix lengths and some rows are mostly padding.
    rows = sorted(rows[:200], key=len)
    return [rows[i * len(rows) // n] for i in range(n)]


def tiny_model(st, models, mode, normalize, out):
    word = models.Transformer(TINY, max_seq_length=48)
    dim = word.get_word_embedding_dimension()
    if mode == "mean+max":
        pool = models.Pooling(dim, pooling_mode_mean_tokens=True, pooling_mode_max_tokens=True)
    else:
        pool = models.Pooling(dim, pooling_mode=mode)
    mods = [word, pool] + ([models.Normalize()] if normalize else [])
    st.SentenceTransformer(modules=mods, device="cpu").save(out)
    return out


def run_embed(prune, folder, text_file, out, batch=7):
    cmd = [prune, "embed", "--model", folder, "--input", text_file, "--output", out, "--batch", str(batch)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-2000:]}")


def compare(name, ours, ref):
    if ours.shape != ref.shape:
        print(f"FAIL {name}: shape {ours.shape} against sentence-transformers' {ref.shape}")
        return False
    err = float(np.abs(ours - ref).max())
    ok = err <= TOL
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max |prune embed - encode| {err:.2e} over {ours.shape}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prune", required=True)
    ap.add_argument("--scratch", required=True)
    args = ap.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import sentence_transformers as st
        from sentence_transformers import models
    except ImportError as e:
        print(f"skipped: sentence-transformers is not installed in {sys.executable} ({e}); scripts/setup_python.sh")
        return 77
    shutil.rmtree(args.scratch, ignore_errors=True)
    os.makedirs(args.scratch)
    texts = sentences()
    text_file = os.path.join(args.scratch, "sentences.txt")
    with open(text_file, "w", encoding="utf-8") as f:
        f.write("\n".join(texts) + "\n")
    folders = []
    for mode in MODES:
        for normalize in (False, True):
            name = f"tiny_{mode.replace('+', '_')}{'_norm' if normalize else ''}"
            folders.append((name, tiny_model(st, models, mode, normalize, os.path.join(args.scratch, name))))
    if os.path.isdir(MINILM):
        folders.append(("all-MiniLM-L6-v2", MINILM))
    else:
        print(f"note: {MINILM} is not linked (scripts/setup.sh): the real model's row is left out")
    ok = True
    for name, folder in folders:
        ref = st.SentenceTransformer(folder, device="cpu").encode(texts, batch_size=7, convert_to_numpy=True)
        out = os.path.join(args.scratch, name + ".npy")
        run_embed(args.prune, folder, text_file, out)
        ok &= compare(name, np.load(out), ref)
    # The other two formats of the last folder: the same numbers, the line numbers of the input.
    name, folder = folders[-1]
    jl, h5 = os.path.join(args.scratch, "e.jsonl"), os.path.join(args.scratch, "e.h5")
    run_embed(args.prune, folder, text_file, jl, batch=32)
    run_embed(args.prune, folder, text_file, h5, batch=32)
    rows = [json.loads(line) for line in open(jl, encoding="utf-8")]
    ok &= [r["line"] for r in rows] == list(range(1, len(texts) + 1))
    ref = np.load(os.path.join(args.scratch, name + ".npy"))
    ok &= compare(name + " .jsonl", np.array([r["embedding"] for r in rows], dtype=np.float32), ref)
    import h5py
    with h5py.File(h5, "r") as f:
        ok &= compare(name + " .h5", f["embeddings"][()], ref)
    print("all equal within", TOL if ok else "")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
