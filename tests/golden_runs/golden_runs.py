#!/usr/bin/env python3
"""The pruning run's results against recorded goldens: the same config and seed give the same numbers and weights.

Each run of RUNS prunes the tiny BERT on a tiny three-class task (or, for `embedding`, a tiny sentence-transformers
folder on STS-B) with the numbers pinned to one code path on every x86 CPU with AVX2: HEADPRUNE_MAX_ISA=avx2,
OpenBLAS's Haswell kernel, ATen's AVX2 kernels, one thread. From its folder the test reads every number of
summary.json that is not a timing, curves.csv's and budget_curves.csv's metric columns, frontier.csv's metric per
candidate, and the exported weights (per tensor: SHA-256 of the bytes, sum, sum of absolute values), and compares
them with tests/golden_runs/<run>.json: numbers within 1e-6 relative, weights byte for byte when the golden was
recorded on this CPU model, else their sums within 1e-5 relative (another CPU model may round a library's
reduction differently).

    python tests/golden_runs/golden_runs.py --prune build/bin/prune --scratch DIR [--only RUN] [--record]

--record writes the goldens (done once, before a change meant to keep the results). Exit 77 (CTest: skipped) for
the embedding run without sentence-transformers.
"""
import argparse
import csv
import hashlib
import json
import math
import os
import shutil
import struct
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN_DIR = os.path.join(REPO, "tests", "golden_runs")
TINY = os.path.join(REPO, "tests", "data", "golden", "tiny_bert")
PINNED_ENV = {"HEADPRUNE_MAX_ISA": "avx2", "OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx2",
              "OMP_NUM_THREADS": "1"}
REL_TOL = 1e-6
WEIGHT_REL_TOL = 1e-5

TASK_ARGS = ["--task", "mnli_subset", "--max-seq-len", "32", "--seed", "7",
             "--set", "run.threads=1", "--set", "prune.rank_split=matched", "--set", "prune.eval_split=mismatched",
             "--rank-examples", "12", "--schedule", "0,25,50,75,100", "--set", "prune.attattr_steps=3",
             "--set", "prune.bootstrap=50", "--set", "prune.latency=false", "--set", "eval.batch_size=8",
             "--set", "prune.rank_batch_size=4", "--recover-steps", "3", "--set", "train.train_split=matched",
             "--set", "train.eval_split=mismatched", "--set", "train.eval_every=5", "--set", "train.max_steps=30", "--set", "train.lr_peak=0.01",
             "--set", "gates.lr=0.5", "--set", "prune.latency_batch=4",
             # Random batches: the 30-step fine-tune learns the tiny task's rule with them; length-grouped (the
             # default) it stays at chance, which would leave every curve flat and a planted change unseen.
             "--set", "train.group_by_length=false"]
RUNS = {
    "heads": ["--target-heads", "5"],
    "budget": ["--target-flops", "0.5"],
    "gates": ["--method", "gates", "--target-flops", "0.5"],
    "frontier": ["--max-drop", "50", "--set", "prune.budget_schedule=100,60,30", "--set", "prune.frontier_time=0.02"],
    "embedding": [],
    "files": ["--target-heads", "5"],  # heads' run on the same rows as CSV files: heads.json's numbers
}
# The files run names the splits of data.train_file and data.validation_file (train, dev) where the task run
# names mnli_subset's (matched, mismatched); everything else is the task run's.
FILES_SPLITS = {"mismatched": "dev", "matched": "train"}  # "mismatched" renamed first: it holds "matched"
FILES_GOLDEN = {"files": "heads"}
EMBED_ARGS = ["--target-flops", "0.5", "--seed", "7", "--set", "run.threads=1", "--set", "prune.search_examples=64",
              "--set", "prune.recover_steps=12", "--set", "prune.eval_split=dev[:120]", "--set",
              "prune.latency_batch=4", "--set", "prune.latency_seq=32", "--set", "train.lr_peak=0.001"]
# Keys whose values are timings, speeds or places on this machine: never compared.
UNSTABLE = ("second", "_ms", "ms_", "speed", "latency", "time", "throughput", "elapsed", "date", "path", "_dir",
            "folder", "machine", "cpu", "runtime", "version", "command", "bound", "measured", "per_s", "hf_check",
            "cost_s")
# The frontier's choice is the fastest candidate within D, a timing: its summary entries and export are not compared.
CHOICE_KEYS = ("final", "frontier.chosen", "files", "precision")
CHOICE_COLUMNS = ("chosen", "pareto")
# Frontier rows are compared by their metrics alone: which candidate is fastest is a timing.
FRONTIER_KEY = ("method", "criterion", "budget", "precision")


def tiny_task_root(root):
    """A data root with a small mnli_subset in words of the tiny vocabulary, its label given by the first sentence in
    both splits (so that fine-tuning learns something the curves can lose)."""
    a = ["the movie was great", "i love this film", "the actors played badly", "it is not very fun",
         "she hated the story", "we love the old man"]
    b = ["it was good", "the plot is boring", "he is funny", "they hate it", "no"]
    labels = ["entailment", "neutral", "contradiction"]
    folder = os.path.join(root, "mnli_subset_textfooler")
    os.makedirs(folder, exist_ok=True)
    for name, shift in (("mnli_matched.tsv", 0), ("mnli_mismatched.tsv", 1)):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            for i in range(30):
                f.write(f"{labels[i % 3]}\t{a[i % len(a)]} .\t{b[(i * 3 + shift) % len(b)]} !\n")
    return root


def tiny_files(root, scratch):
    """The tiny task's two splits as CSV files (sentence1, sentence2, label names), quoted by the csv module."""
    paths = {}
    for name, split in (("mnli_matched.tsv", "train"), ("mnli_mismatched.tsv", "dev")):
        path = os.path.join(scratch, f"{split}.csv")
        with open(os.path.join(root, "mnli_subset_textfooler", name), encoding="utf-8") as src, \
                open(path, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, quoting=csv.QUOTE_ALL)
            w.writerow(["sentence1", "sentence2", "label"])
            for line in src:
                label, a, b = line.rstrip("\n").split("\t")
                w.writerow([a, b, label])
        paths[split] = path
    return paths


def with_id2label(model, labels):
    """The model's config.json given id2label in `labels`' order (the order a fine-tuned model keeps)."""
    path = os.path.join(model, "config.json")
    cfg = json.load(open(path, encoding="utf-8"))
    cfg["id2label"] = {str(i): name for i, name in enumerate(labels)}
    cfg["label2id"] = {name: i for i, name in enumerate(labels)}
    json.dump(cfg, open(path, "w", encoding="utf-8"), indent=2)
    return model


def tiny_without_classifier(out):
    """The tiny BERT without its classifier's weights, so that the run fine-tunes it first (stage 2)."""
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(TINY, out)
    path = os.path.join(out, "model.safetensors")
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    kept, chunks, offset = {}, [], 0
    for name, t in header.items():
        if name == "__metadata__":
            kept[name] = t
        elif not name.startswith("classifier."):
            lo, hi = t["data_offsets"]
            kept[name] = {**t, "data_offsets": [offset, offset + hi - lo]}
            chunks.append(data[lo:hi])
            offset += hi - lo
    text = json.dumps(kept).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))
    return out


def embedding_folder(out):
    """A tiny sentence-transformers folder (the tiny BERT, mean pooling, Normalize); None without the package."""
    try:
        from sentence_transformers import SentenceTransformer, models
    except ImportError:
        return None
    word = models.Transformer(TINY, max_seq_length=48)
    pool = models.Pooling(word.get_word_embedding_dimension(), pooling_mode="mean")
    SentenceTransformer(modules=[word, pool, models.Normalize()], device="cpu").save(out)
    return out


def run_command(name, prune, scratch):
    out = os.path.join(scratch, name)
    shutil.rmtree(out, ignore_errors=True)
    if name == "embedding":
        folder = embedding_folder(os.path.join(scratch, "tiny_st"))
        if folder is None:
            return None, out
        cmd = [prune, "--config", os.path.join(REPO, "configs", "sts_embed.yaml"), "--model", folder, "--out", out,
               *EMBED_ARGS]
    elif name == "files":
        root = tiny_task_root(os.path.join(scratch, "data"))
        files = tiny_files(root, scratch)
        model = with_id2label(tiny_without_classifier(os.path.join(scratch, "tiny_bert_files")),
                              ["contradiction", "entailment", "neutral"])  # mnli_subset's class order
        args = []
        for a in TASK_ARGS[2:]:  # all but --task, the splits renamed
            key, _, value = a.rpartition("=")
            args.append(f"{key}={FILES_SPLITS[value]}" if key and value in FILES_SPLITS else a)
        cmd = [prune, "--model", model, "--train-file", files["train"], "--validation-file", files["dev"], *args,
               "--out", out, *RUNS[name]]
    else:
        root = tiny_task_root(os.path.join(scratch, "data"))
        model = tiny_without_classifier(os.path.join(scratch, "tiny_bert_base"))
        cmd = [prune, "--model", model, *TASK_ARGS, "--data-root", root, "--out", out, *RUNS[name]]
    return cmd, out


def unstable(key):
    k = key.lower()
    return any(word in k for word in UNSTABLE)


def flatten(value, prefix, into):
    """Every number and string of a JSON value under its path, timings left out."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not unstable(k):
                flatten(v, f"{prefix}.{k}" if prefix else k, into)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            flatten(v, f"{prefix}[{i}]", into)
    elif isinstance(value, (int, float, str, bool)) or value is None:
        into[prefix] = value


def read_csv(path, key_columns=None):
    """{row key: {column: value}} of a CSV's stable columns; rows keyed by key_columns or by their number."""
    rows = {}
    with open(path, encoding="utf-8", newline="") as f:
        for i, row in enumerate(csv.DictReader(f)):
            key = " ".join(row[c] for c in key_columns) if key_columns else str(i)
            rows[key] = {c: number_or_text(v) for c, v in row.items() if not unstable(c)}
    return rows


def number_or_text(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def safetensors_digest(path):
    """{tensor name: [sha256 of its bytes, sum, sum of |x|]} of a safetensors file (float32 tensors summed)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in sorted(header.items()):
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        raw = data[lo:hi]
        total = absolute = 0.0
        if t["dtype"] == "F32":
            for (x,) in struct.iter_unpack("<f", raw):
                total += x
                absolute += abs(x)
        out[name] = [hashlib.sha256(raw).hexdigest(), total, absolute]
    return out


def collect(out, scratch, chosen_by_timing):
    """What the golden holds of a run's folder; paths under `scratch` written relative to it."""
    result = {"summary": {}, "csv": {}, "weights": {}}
    flatten(json.load(open(os.path.join(out, "summary.json"), encoding="utf-8")), "", result["summary"])
    for stage in ("finetune", "recover", "gates"):  # the training runs' results
        path = os.path.join(out, stage, "train_result.json")
        if os.path.exists(path):
            flatten(json.load(open(path, encoding="utf-8")), f"{stage}/train_result", result["summary"])
    for name in ("curves.csv", "budget_curves.csv"):
        if os.path.exists(os.path.join(out, name)):
            result["csv"][name] = read_csv(os.path.join(out, name))
    if os.path.exists(os.path.join(out, "frontier.csv")):
        rows = read_csv(os.path.join(out, "frontier.csv"), FRONTIER_KEY)
        result["csv"]["frontier.csv"] = {k: {c: v for c, v in row.items() if c not in CHOICE_COLUMNS}
                                         for k, row in rows.items()}
    for key, value in list(result["summary"].items()):
        if chosen_by_timing and any(key == k or key.startswith(k + ".") for k in CHOICE_KEYS):
            del result["summary"][key]
        elif isinstance(value, str):
            result["summary"][key] = value.replace(scratch, "<scratch>")
    model = os.path.join(out, "model")
    if os.path.isdir(model) and not chosen_by_timing:
        for name in sorted(os.listdir(model)):  # model.safetensors, or its shards
            if name.endswith(".safetensors"):
                result["weights"][name] = safetensors_digest(os.path.join(model, name))
    return result


def close(a, b, rel):
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return False
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)
    return a == b


def compare(golden, got, same_cpu):
    """The differences between a golden and a run, one line each."""
    problems = []
    for section in ("summary",):
        g, r = golden[section], got[section]
        for key in sorted(set(g) | set(r)):
            if key not in r or key not in g:
                problems.append(f"summary.json {key}: {'missing' if key not in r else 'new'}")
            elif not close(g[key], r[key], REL_TOL):
                problems.append(f"summary.json {key}: {r[key]!r}, golden {g[key]!r}")
    for name in sorted(set(golden["csv"]) | set(got["csv"])):
        g, r = golden["csv"].get(name), got["csv"].get(name)
        if g is None or r is None:
            problems.append(f"{name}: {'missing' if r is None else 'new'}")
            continue
        for row in sorted(set(g) | set(r)):
            if row not in g or row not in r:
                problems.append(f"{name} row {row}: {'missing' if row not in r else 'new'}")
                continue
            for col in sorted(set(g[row]) | set(r[row])):
                if not close(g[row].get(col), r[row].get(col), REL_TOL):
                    problems.append(f"{name} row {row} {col}: {r[row].get(col)!r}, golden {g[row].get(col)!r}")
    for name in sorted(set(golden["weights"]) | set(got["weights"])):
        g, r = golden["weights"].get(name, {}), got["weights"].get(name, {})
        for t in sorted(set(g) | set(r)):
            if t not in g or t not in r:
                problems.append(f"{name} {t}: {'missing' if t not in r else 'new'}")
            elif same_cpu and g[t][0] != r[t][0]:
                problems.append(f"{name} {t}: bytes differ (sum {r[t][1]!r}, golden {g[t][1]!r})")
            elif not (close(float(g[t][1]), float(r[t][1]), WEIGHT_REL_TOL) and
                      close(float(g[t][2]), float(r[t][2]), WEIGHT_REL_TOL)):
                problems.append(f"{name} {t}: sums {r[t][1]!r}/{r[t][2]!r}, golden {g[t][1]!r}/{g[t][2]!r}")
    return problems


def files_words(golden):
    """A task run's golden as the files run writes it: task "files", splits train and dev, the model's folder."""
    def word(v):
        if not isinstance(v, str):
            return v
        if v == "mnli_subset":
            return "files"
        for old, new in FILES_SPLITS.items():
            v = v.replace(old, new)
        return v.replace("tiny_bert_base", "tiny_bert_files").replace("<scratch>/heads/", "<scratch>/files/")
    out = {**golden, "summary": {k: word(v) for k, v in golden["summary"].items()}}
    return out


def without_extra_metrics(got):
    """A files run's results less the metrics a files' task adds to accuracy (macro_f1 and mcc for three classes),
    which mnli_subset does not compute."""
    extra = ("macro_f1", "mcc")
    drop = lambda key: any(key == e or key.endswith("." + e) for e in extra)
    column = lambda c: c.removeprefix("select_") not in extra  # the selection slice's scores too
    csv_rows = {name: {row: {c: v for c, v in cols.items() if column(c)} for row, cols in rows.items()}
                for name, rows in got["csv"].items()}
    return {**got, "summary": {k: v for k, v in got["summary"].items() if not drop(k)}, "csv": csv_rows}


def cpu_model():
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prune", required=True)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--only", choices=sorted(RUNS), action="append")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        if not any(line.startswith("flags") and " avx2" in line and " fma" in line for line in f):
            print("skipped: this CPU has no AVX2 and FMA, the code path the goldens are pinned to")
            return 77
    args.scratch = os.path.abspath(args.scratch)
    os.makedirs(args.scratch, exist_ok=True)
    env = {**os.environ, **PINNED_ENV, "HF_HUB_OFFLINE": "1"}
    ok, skipped = True, []
    for name in args.only or sorted(RUNS):
        if args.record and name in FILES_GOLDEN:
            continue  # compared with another run's golden
        cmd, out = run_command(name, args.prune, args.scratch)
        if cmd is None:
            skipped.append(f"{name}: sentence-transformers is not installed in {sys.executable}")
            continue
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            print(f"FAIL {name}: exit {r.returncode}\n{r.stderr[-3000:]}")
            ok = False
            continue
        got = collect(out, os.path.abspath(args.scratch), name == "frontier")
        path = os.path.join(GOLDEN_DIR, f"{name}.json")
        if args.record:
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"cpu": cpu_model(), **got}, f, indent=1, sort_keys=True)
                f.write("\n")
            print(f"recorded {path}")
            continue
        if name in FILES_GOLDEN:  # the task run's golden, its split names and task in the files' words
            path = os.path.join(GOLDEN_DIR, f"{FILES_GOLDEN[name]}.json")
        golden = json.load(open(path, encoding="utf-8"))
        if name in FILES_GOLDEN:
            golden = files_words(golden)
            got = without_extra_metrics(got)
        problems = compare(golden, got, golden["cpu"] == cpu_model())
        counted = len(got["summary"]) + sum(len(v) for v in got["csv"].values()) + \
            sum(len(v) for v in got["weights"].values())
        print(f"{'ok  ' if not problems else 'FAIL'} {name}: {counted} numbers, rows and tensors against the golden"
              f" ({'bytes' if golden['cpu'] == cpu_model() else 'sums'} for the weights)")
        for p in problems[:40]:
            print(f"     {p}")
        ok &= not problems
    for s in skipped:
        print(f"skipped: {s}")
    if not ok:
        return 1
    return 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
