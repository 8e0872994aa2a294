#!/usr/bin/env python3
"""headprune at fp32, bf16 and int8 on every instruction-set path this CPU has (HEADPRUNE_MAX_ISA), against
the other CPU engines on one fine-tuned model, side by side in one run, same threads and inputs (#26, #46):
dev metric, whole-dev-set time (batches of 32, length-sorted, padded to each batch's longest, as `prune eval`
does), and latency at batch 1 and 32 x --seq tokens (random ids, no padding; the median of runs for at least
--min-seconds), in --rounds interleaved rounds (every engine once per round; the medians over rounds).

Engines: headprune (`prune eval` / `prune bench --precision P`), transformers fp32 (the folder as
AutoModelForSequenceClassification runs it), ONNX Runtime fp32 (headprune's `prune export
--onnx`) and int8 (onnxruntime.quantization.quantize_dynamic, per channel, s8 weights, u8 activations),
PyTorch 1.13 dynamic int8 (torch.ao.quantization.quantize_dynamic on nn.Linear, engine onednn) and
CTranslate2 int8 (its BertModel converter; unpruned models only) when `ctranslate2` is installed.

Run from the repository root with the reference Python (scripts/setup.sh installs it):
  ~/.cache/headprune/venv/bin/python bench/precision_bench.py --model runs/sst2/finetune/best --task sst2 \
      [--slim runs/sst2/model] [--threads 2] [--seq 128] [--isa avx2,avx512_vnni] [--rounds 2] [--json out.json]
"""
import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


import numpy as np  # noqa: E402
import torch  # noqa: E402
from scipy import stats  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

# task: (folder, text columns, label column, regression)
TASKS = {
    "sst2": ("SST-2", ["sentence"], "label", False),
    "mrpc": ("MRPC", ["#1 String", "#2 String"], "Quality", False),
    "stsb": ("STS-B", ["sentence1", "sentence2"], "score", True),
}


def read_dev(root, task):
    folder, cols, label, regression = TASKS[task]
    with open(os.path.join(root, "glue", folder, "dev.tsv"), newline="", encoding="utf-8-sig") as f:  # MRPC has a BOM
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    texts = [[r[c] for c in cols] for r in rows]
    labels = np.array([float(r[label]) if regression else int(r[label]) for r in rows])
    return texts, labels, regression


def metric(logits, labels, regression):
    if regression:
        pred = logits[:, 0]
        return {"pearson": stats.pearsonr(pred, labels)[0], "spearman": stats.spearmanr(pred, labels)[0]}
    pred = logits.argmax(1)
    out = {"accuracy": float((pred == labels).mean())}
    if logits.shape[1] == 2:
        tp = float(((pred == 1) & (labels == 1)).sum())
        out["f1"] = 2 * tp / max(1.0, float((pred == 1).sum() + (labels == 1).sum()))
    return out


def encode(tok, texts, max_len):
    enc = [tok(*t, truncation=True, max_length=max_len) for t in texts]
    return [(e["input_ids"], e.get("token_type_ids", [0] * len(e["input_ids"]))) for e in enc]


def batches(encoded, size):
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]))
    for s in range(0, len(order), size):
        idx = order[s:s + size]
        S = max(len(encoded[i][0]) for i in idx)
        ids = np.zeros((len(idx), S), np.int64)
        types = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for r, i in enumerate(idx):
            n = len(encoded[i][0])
            ids[r, :n], types[r, :n], mask[r, :n] = encoded[i][0], encoded[i][1], 1
        yield idx, ids, mask, types


def run_dev(forward, encoded, n_out):
    logits = np.zeros((len(encoded), n_out), np.float32)
    start = time.perf_counter()
    for idx, ids, mask, types in batches(encoded, 32):
        logits[idx] = forward(ids, mask, types)
    return logits, time.perf_counter() - start


def latency_ms(forward, vocab, batch, seq, min_seconds):
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, vocab, size=(batch, seq), dtype=np.int64)
    mask, types = np.ones_like(ids), np.zeros_like(ids)
    forward(ids, mask, types)
    times, start = [], time.perf_counter()
    while len(times) < 5 or time.perf_counter() - start < min_seconds:
        t = time.perf_counter()
        forward(ids, mask, types)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


ISA_LEVELS = ["scalar", "avx2", "avx_vnni", "avx512", "avx512_vnni", "avx512_bf16", "amx"]


def cpu_isas(prune):
    """The instruction-set levels this CPU has, from `prune --version`'s ISA line ("ISA: CPU avx2 (has none of
    avx_vnni, ...)"), and the line itself."""
    out = subprocess.run([prune, "--version"], check=True, capture_output=True, text=True).stdout
    m = re.search(r"ISA: CPU (\w+)(?: \(has none of ([\w, ]+)\))?", out)
    top, missing = m.group(1), set((m.group(2) or "").replace(" ", "").split(","))
    levels = [lv for lv in ISA_LEVELS[:ISA_LEVELS.index(top) + 1] if lv not in missing]
    return levels, out


def headprune_env(isa):
    env = dict(os.environ)
    env["HEADPRUNE_MAX_ISA"] = isa
    return env


def headprune_paths(args, precision, isa):
    """The line `prune --version` prints for the precision under the cap (its path and why)."""
    out = subprocess.run([args.prune, "--version"], check=True, capture_output=True, text=True,
                         env=headprune_env(isa)).stdout
    m = re.search((r"GEMM " if precision == "fp32" else precision + r": ") + r"([^|]+)", out)
    return m.group(1).strip() if m else ""


def headprune_eval(args, model, precision, task, isa):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "eval.json")
        subprocess.run([args.prune, "eval", "--model", model, "--task", task, "--threads", str(args.threads),
                        "--precision", precision, "--batch", "32", "--max-seq-len", str(args.max_len),
                        "--output", out, "--out", tmp],
                       check=True, capture_output=True, text=True, env=headprune_env(isa))
        with open(out) as f:
            ev = json.load(f)
    return {"metrics": ev["metrics"], "dev_s": ev["seconds"], "path": headprune_paths(args, precision, isa)}


def headprune_latency(args, model, precision, task, isa):
    b = subprocess.run([args.prune, "bench", "--model", model, "--task", task, "--threads", str(args.threads),
                        "--precision", precision,
                        "--seq", str(args.seq), "--set", "bench.batches=[1,32]", "--min-seconds",
                        str(args.min_seconds)], check=True, capture_output=True, text=True,
                       env=headprune_env(isa)).stdout
    lat = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"batch\s+(\d+) x \d+: model\s+([\d.]+) ms", b)}
    return lat[1], lat[32]


def python_eval(forward, encoded, labels, regression, n_out):
    logits, secs = run_dev(forward, encoded, n_out)
    return {"metrics": metric(logits, labels, regression), "dev_s": secs}


def python_latency(forward, vocab, args):
    return (latency_ms(forward, vocab, 1, args.seq, args.min_seconds),
            latency_ms(forward, vocab, 32, args.seq, args.min_seconds))


def ort_forward(path, threads):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return lambda ids, mask, types: sess.run(
        None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]


def onnx_files(args, model, tmp):
    """model.onnx and headprune's int8 graph model.int8.onnx (weights ±63) through `prune export --int8` (both
    checked in ONNX Runtime; --onnx alone with --latency-only), and ONNX Runtime's own dynamic int8
    quantisation of model.onnx."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    out = os.path.join(tmp, os.path.basename(os.path.normpath(model)))
    what = ["--onnx"] if args.latency_only else ["--int8", "--task", args.task]
    subprocess.run([args.prune, "export", "--model", model, "--to", out, "--threads", str(args.threads)] + what,
                   check=True, capture_output=True, text=True)
    fp32 = os.path.join(out, "model.onnx")
    ort_int8 = os.path.join(tmp, os.path.basename(os.path.normpath(model)) + ".ort_dynamic.onnx")
    quantize_dynamic(fp32, ort_int8, per_channel=True, weight_type=QuantType.QInt8)
    return fp32, ort_int8, None if args.latency_only else os.path.join(out, "model.int8.onnx")


def hf_model(model_dir):
    from transformers import AutoModelForSequenceClassification
    return AutoModelForSequenceClassification.from_pretrained(model_dir, trust_remote_code=True).eval()


def torch_forward(m):
    """A transformers model as the engines' forward(ids, mask, types) -> logits."""
    def forward(ids, mask, types):
        with torch.no_grad():
            return m(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                     token_type_ids=torch.from_numpy(types)).logits.numpy()
    return forward


def transformers_fp32(model_dir):
    """The folder as transformers runs it (fp32, eager PyTorch): the user's own baseline, and the check that a
    slimmed export's speed-up holds outside headprune (#41)."""
    return torch_forward(hf_model(model_dir))


def torch_dynamic_int8(model_dir):
    torch.backends.quantized.engine = "onednn"
    return torch_forward(torch.ao.quantization.quantize_dynamic(hf_model(model_dir), {torch.nn.Linear},
                                                                dtype=torch.qint8))


def ctranslate2_int8(model_dir, tmp, threads):
    import ctranslate2
    from safetensors.numpy import load_file
    out = os.path.join(tmp, "ct2")

    class Converter(ctranslate2.converters.TransformersConverter):
        def load_model(self, model_class, path, **kwargs):  # CTranslate2 4.8 passes transformers 5's `dtype`
            kwargs["torch_dtype"] = kwargs.pop("dtype", None)
            return model_class.from_pretrained(path, **kwargs)
    Converter(model_dir).convert(out, quantization="int8", force=True)
    enc = ctranslate2.Encoder(out, device="cpu", compute_type="int8", intra_threads=threads)
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(single):
        w = load_file(single)
    else:  # transformers' shards (export.max_shard_mb): the classifier is in one of them
        with open(os.path.join(model_dir, "model.safetensors.index.json")) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        w = {k: v for shard in shards for k, v in load_file(os.path.join(model_dir, shard)).items()}
    cw, cb = w["classifier.weight"], w["classifier.bias"]

    def forward(ids, mask, types):
        lengths = mask.sum(1)
        tokens = [row[:n].tolist() for row, n in zip(ids, lengths)]
        type_ids = [row[:n].tolist() for row, n in zip(types, lengths)]
        pooled = np.asarray(enc.forward_batch(tokens, token_type_ids=type_ids).pooler_output)
        return pooled @ cw.T + cb
    return forward


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="fine-tuned model folder (with its classifier)")
    ap.add_argument("--slim", help="a slimmed export of the same model (headprune and ONNX Runtime rows)")
    ap.add_argument("--task", default="sst2", choices=sorted(TASKS))
    ap.add_argument("--data-root", default=os.environ.get("HEADPRUNE_DATA", "../shared/data"))
    ap.add_argument("--prune", default="build/bin/prune")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--max-len", type=int, default=128, help="dev examples' token limit")
    ap.add_argument("--min-seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds of every engine's latency")
    ap.add_argument("--isa", default="", help="comma-separated HEADPRUNE_MAX_ISA levels (default: every one "
                    "this CPU has from avx2 up, and scalar with --scalar)")
    ap.add_argument("--scalar", action="store_true", help="also the scalar path (slow)")
    ap.add_argument("--precisions", default="fp32,bf16,int8")
    ap.add_argument("--skip", default="", help="comma-separated engines to leave out: hf,torch,ct2,ort")
    ap.add_argument("--latency-only", action="store_true", help="no dev-set runs: the latency columns alone")
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    skip = set(filter(None, args.skip.split(",")))
    if args.latency_only:  # the dev-set columns stay empty
        globals()["headprune_eval"] = lambda a, m, p, t, i: {"metrics": {}, "dev_s": float("nan"),
                                                               "path": headprune_paths(a, p, i)}
        globals()["python_eval"] = lambda *_: {"metrics": {}, "dev_s": float("nan")}
    levels, version = cpu_isas(args.prune)
    isas = args.isa.split(",") if args.isa else [lv for lv in levels if lv != "scalar" or args.scalar]
    print(version.strip(), flush=True)

    texts, labels, regression = read_dev(args.data_root, args.task)
    tok = AutoTokenizer.from_pretrained(args.model)
    encoded = encode(tok, texts, args.max_len)
    with open(os.path.join(args.model, "config.json")) as f:
        cfg = json.load(f)
    n_out, vocab = 1 if regression else cfg.get("num_labels", len(cfg.get("id2label", [0, 1]))), cfg["vocab_size"]
    models = [("unpruned", args.model)] + ([("slimmed", args.slim)] if args.slim else [])
    rows = []  # (name, isa, result dict, latency function)
    with tempfile.TemporaryDirectory() as tmp:
        for name, model in models:
            for precision in args.precisions.split(","):
                for isa in isas:
                    r = headprune_eval(args, model, precision, args.task, isa)
                    rows.append((f"headprune {precision}, {name}", isa, r,
                                 lambda m=model, p=precision, i=isa: headprune_latency(args, m, p, args.task, i)))
                    print(rows[-1][0], isa, r, flush=True)
            if "hf" not in skip:
                fwd = transformers_fp32(model)
                r = python_eval(fwd, encoded, labels, regression, n_out)
                rows.append((f"transformers {transformers.__version__} fp32, {name}", "-", r,
                             lambda f=fwd: python_latency(f, vocab, args)))
                print(rows[-1][0], r, flush=True)
            if "ort" not in skip:
                fp32, int8, hp_int8 = onnx_files(args, model, tmp)
                for label, path in (("fp32", fp32), ("int8 (quantize_dynamic, per channel)", int8),
                                    ("int8 of headprune's export (model.int8.onnx, weights ±63)", hp_int8)):
                    if path is None:
                        continue
                    fwd = ort_forward(path, args.threads)
                    r = python_eval(fwd, encoded, labels, regression, n_out)
                    rows.append((f"ONNX Runtime {label}, {name}", "-", r,
                                 lambda f=fwd: python_latency(f, vocab, args)))
                    print(rows[-1][0], r, flush=True)
        if "torch" not in skip:
            fwd = torch_dynamic_int8(args.model)
            r = python_eval(fwd, encoded, labels, regression, n_out)
            rows.append((f"PyTorch {torch.__version__.split('+')[0]} dynamic int8 (onednn), unpruned", "-", r,
                         lambda f=fwd: python_latency(f, vocab, args)))
        if "ct2" not in skip:
            try:
                import ctranslate2
                fwd = ctranslate2_int8(args.model, tmp, args.threads)
                r = python_eval(fwd, encoded, labels, regression, n_out)
                rows.append((f"CTranslate2 {ctranslate2.__version__} int8, unpruned", "-", r,
                             lambda f=fwd: python_latency(f, vocab, args)))
            except ImportError:
                print("CTranslate2 is not installed: its row is left out", file=sys.stderr)
        # Latency in interleaved rounds: every engine once per round, so that drift hits them alike.
        lat = [[] for _ in rows]
        for k in range(args.rounds):
            for i, row in enumerate(rows):
                lat[i].append(row[3]())
            print(f"round {k + 1}/{args.rounds} done", flush=True)
        for i, (_, _, r, _) in enumerate(rows):
            r["b1_ms"] = statistics.median(b1 for b1, _ in lat[i])
            r["b32_ms"] = statistics.median(b32 for _, b32 in lat[i])

    base = next(r for n, _, r, _ in rows if n.startswith("ONNX Runtime fp32, unpruned")) if "ort" not in skip else None
    base8 = next((r for n, _, r, _ in rows if n.startswith("ONNX Runtime int8 (quantize_dynamic")
                  and n.endswith("unpruned")), None)
    key = "spearman" if regression else "accuracy"
    print(f"\n{args.task} dev, {len(labels)} examples; {args.threads} threads; latency at {args.seq} tokens; "
          f"medians of {args.rounds} interleaved rounds\n")
    print(f"| engine | ISA cap | dev {key} | dev set | batch 32 | batch 1 | vs ONNX Runtime fp32 (batch 32 / 1) "
          f"| vs ONNX Runtime int8 (batch 32 / 1) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, isa, r, _ in rows:
        vs = (f"x{base['b32_ms'] / r['b32_ms']:.2f} / x{base['b1_ms'] / r['b1_ms']:.2f}" if base else "")
        vs8 = (f"x{base8['b32_ms'] / r['b32_ms']:.2f} / x{base8['b1_ms'] / r['b1_ms']:.2f}" if base8 else "")
        dev = f"{100 * r['metrics'][key]:.2f}" if key in r["metrics"] else "-"
        print(f"| {name} | {isa} | {dev} | {r['dev_s']:.2f} s | {r['b32_ms']:.1f} ms | "
              f"{r['b1_ms']:.2f} ms | {vs} | {vs8} |")
    paths = {(n.split(",")[0], isa): r["path"] for n, isa, r, _ in rows if "path" in r}
    print("\nheadprune's path per precision and cap (prune --version):")
    for (n, isa), p in sorted(paths.items()):
        print(f"- {n} under {isa}: {p}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"engine": n, "isa": isa, **{k: v for k, v in r.items() if k != "logits"}}
                       for n, isa, r, _ in rows], f, indent=1)


if __name__ == "__main__":
    main()
