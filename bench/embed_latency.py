#!/usr/bin/env python3
"""Latency of a sentence-embedding model at batch 1 and 32 in every runtime a user would run it in (#59), one run.

For the unpruned folder (--unpruned, e.g. checkpoints/all-MiniLM-L6-v2) and a pruned export (--pruned, RUN_DIR/model of
`prune --config configs/sts_embed.yaml`): headprune (`prune bench`, fp32 and int8), SentenceTransformer's forward
(PyTorch eager, the encoder, pooling and Normalize), ONNX Runtime on `prune export --onnx --int8`'s model.onnx (fp32)
and model.int8.onnx (headprune's int8 scheme), and ONNX Runtime's own quantize_dynamic int8 of that model.onnx (int8
weights per output channel, as tools/ort_reference.py makes it). Every runtime gets the same random ids [batch, SEQ]
(all attended), the same thread count; ROUNDS interleaved rounds, each the median of REPS calls after a warm-up, and
the table gives the median round and the speed-up over SentenceTransformer on the unpruned folder.

Usage: ~/.cache/headprune/venv/bin/python bench/embed_latency.py --pruned DIR [--unpruned DIR] [--prune build/bin/prune]
       [--seq 128] [--threads 2] [--rounds 3] [--reps 10] [--work DIR]
"""
import argparse
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

BATCHES = (1, 32)


def export(prune, folder, out, threads):
    """`prune export --onnx --int8` of a sentence-transformers folder (model.onnx, model.int8.onnx) into `out`."""
    if not os.path.exists(os.path.join(out, "model.int8.onnx")):
        subprocess.run([prune, "export", "--model", folder, "--to", out, "--force", "--onnx", "--int8", "--task", "stsb",
                        "--threads", str(threads)], check=True, stdout=subprocess.DEVNULL)
    quantized = os.path.join(out, "ort.int8.onnx")
    if not os.path.exists(quantized):
        from onnxruntime.quantization import QuantType, quantize_dynamic
        logging.getLogger().setLevel(logging.ERROR)
        quantize_dynamic(os.path.join(out, "model.onnx"), quantized, per_channel=True, weight_type=QuantType.QInt8)
    return out


def timed(call, reps):
    call()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        call()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def headprune_ms(prune, folder, precision, seq, threads):
    """{batch: ms} from `prune bench` (its own warm-up and median)."""
    out = subprocess.run([prune, "bench", "--model", folder, "--batches", ",".join(map(str, BATCHES)), "--seq",
                          str(seq), "--threads", str(threads), "--precision", precision, "--task", "stsb"],
                         check=True, capture_output=True, text=True).stdout
    return {int(m[1]): float(m[2]) for m in re.finditer(r"batch\s+(\d+) x \d+: model\s+([\d.]+) ms", out)}


def feeds(vocab, seq):
    rng = np.random.default_rng(0)
    return {b: {"input_ids": rng.integers(1000, vocab, size=(b, seq), dtype=np.int64),
                "attention_mask": np.ones((b, seq), dtype=np.int64),
                "token_type_ids": np.zeros((b, seq), dtype=np.int64)} for b in BATCHES}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pruned", required=True)
    ap.add_argument("--unpruned", default="checkpoints/all-MiniLM-L6-v2")
    ap.add_argument("--prune", default="build/bin/prune")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--work")
    a = ap.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    torch.set_num_threads(a.threads)
    import onnxruntime as ort
    from sentence_transformers import SentenceTransformer
    work = a.work or tempfile.mkdtemp(prefix="embed_latency.")
    models = {"unpruned": a.unpruned, "pruned": a.pruned}
    onnx_dirs = {k: export(a.prune, v, os.path.join(work, k), a.threads) for k, v in models.items()}

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = a.threads
    opts.inter_op_num_threads = 1
    runners = {}  # (runtime, model) -> {batch: callable}
    for k, folder in models.items():
        st = SentenceTransformer(folder, device="cpu", trust_remote_code=True)
        st.eval()
        f = feeds(st[0].auto_model.config.vocab_size, a.seq)
        tensors = {b: {n: torch.from_numpy(v) for n, v in f[b].items()} for b in BATCHES}

        def st_call(b, st=st, tensors=tensors):
            with torch.inference_mode():
                return st(dict(tensors[b]))["sentence_embedding"]
        runners[("SentenceTransformer fp32", k)] = {b: (lambda b=b, c=st_call: c(b)) for b in BATCHES}
        for name, file in (("ONNX Runtime fp32", "model.onnx"), ("ONNX Runtime int8 (quantize_dynamic)", "ort.int8.onnx"),
                           ("ONNX Runtime int8 (headprune's model.int8.onnx)", "model.int8.onnx")):
            if not os.path.exists(os.path.join(onnx_dirs[k], file)):
                continue
            sess = ort.InferenceSession(os.path.join(onnx_dirs[k], file), opts, providers=["CPUExecutionProvider"])
            names = {i.name for i in sess.get_inputs()}
            runners[(name, k)] = {b: (lambda b=b, s=sess, n=names, f=f: s.run(None, {x: v for x, v in f[b].items() if x in n}))
                                  for b in BATCHES}
    rounds = {}
    for r in range(a.rounds):
        for key, calls in runners.items():
            for b, call in calls.items():
                rounds.setdefault((key, b), []).append(timed(call, a.reps))
        for k, folder in models.items():
            for p in ("fp32", "int8"):
                for b, ms in headprune_ms(a.prune, folder, p, a.seq, a.threads).items():
                    rounds.setdefault(((f"headprune {p}", k), b), []).append(ms)
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    med = {key: statistics.median(v) for key, v in rounds.items()}
    base = {b: med[(("SentenceTransformer fp32", "unpruned"), b)] for b in BATCHES}
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"embed latency: random ids x {a.seq} tokens, {a.threads} threads, {cpu}; median of {a.rounds} rounds "
          f"(each the median of {a.reps} calls); pruned = {a.pruned}\n")
    print("| runtime | model | batch 1 | × | batch 32 | × |\n|---|---|---|---|---|---|")
    keys = sorted({key for key, _ in med}, key=lambda k: (k[1] != "unpruned", k[0]))
    for key in keys:
        cells = []
        for b in BATCHES:
            ms = med[(key, b)]
            cells += [f"{ms:.2f} ms", f"×{base[b] / ms:.2f}"]
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
