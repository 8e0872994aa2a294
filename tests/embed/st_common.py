"""What the sentence-transformers tests share (#59): their start (arguments, the package or exit 77, a fresh scratch
folder) and the tiny folders they build with the package itself from the tiny BERT."""
import argparse
import json
import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(REPO, "tests", "data", "golden", "tiny_bert")


STSB_DEV = os.path.join(REPO, "..", "shared", "data", "glue", "STS-B", "dev.tsv")


def stsb_dev(n=200):
    """The first n pairs of STS-B dev: [(sentence1, sentence2, score)]."""
    with open(STSB_DEV, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    head = rows[0]
    a, b, y = head.index("sentence1"), head.index("sentence2"), head.index("score")
    return [(r[a], r[b], float(r[y])) for r in rows[1:n + 1]]


def start():
    """(args with .prune and .scratch, the sentence_transformers module, its models module), the scratch folder
    emptied; exits 77 (CTest: skipped) when the package is not installed."""
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
        sys.exit(77)
    shutil.rmtree(args.scratch, ignore_errors=True)
    os.makedirs(args.scratch)
    return args, st, models


def tiny_model(st, models, mode, normalize, out):
    """A sentence-transformers folder at `out`: the tiny BERT, pooling `mode` (or "mean+max"), Normalize or not."""
    word = models.Transformer(TINY, max_seq_length=48)
    dim = word.get_word_embedding_dimension()
    if mode == "mean+max":
        pool = models.Pooling(dim, pooling_mode_mean_tokens=True, pooling_mode_max_tokens=True)
    else:
        pool = models.Pooling(dim, pooling_mode=mode)
    mods = [word, pool] + ([models.Normalize()] if normalize else [])
    st.SentenceTransformer(modules=mods, device="cpu").save(out)
    return out


def run(cmd, want=0, env=None):
    """Runs cmd; exits with its output unless it returns `want`."""
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != want:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode} (want {want}):\n{r.stdout[-1500:]}\n{r.stderr[-2500:]}")
    return r


def check(ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    return ok


def prune_tiny(args, st, models, flags):
    """`prune --config configs/sts_embed.yaml` with `flags` on a tiny folder (mean pooling, Normalize) in the scratch
    folder: (the folder, the command, its summary.json)."""
    folder = tiny_model(st, models, "mean", True, os.path.join(args.scratch, "tiny_st"))
    out = os.path.join(args.scratch, "run")
    cmd = [args.prune, "--config", os.path.join(REPO, "configs", "sts_embed.yaml"), "--model", folder, "--out", out,
           *flags]
    run(cmd)
    return folder, cmd, json.load(open(os.path.join(out, "summary.json"), encoding="utf-8"))


def check_export(args, st, folder, summary, n=200):
    """The run's export (RUN_DIR/model) in SentenceTransformer against `prune embed` of it on STS-B dev[:n]'s
    sentences (within 1e-5), and the mean cosine to the teacher the summary reports against sentence-transformers'
    own; True when both hold."""
    import numpy as np
    export = os.path.join(args.scratch, "run", "model")
    pairs = stsb_dev(n)
    both = [p[0] for p in pairs] + [p[1] for p in pairs]
    texts = os.path.join(args.scratch, "both.txt")
    with open(texts, "w", encoding="utf-8") as f:
        f.write("\n".join(both) + "\n")
    npy = os.path.join(args.scratch, "ours.npy")
    run([args.prune, "embed", "--model", export, "--input", texts, "--output", npy])
    ref = st.SentenceTransformer(export, device="cpu", trust_remote_code=True).encode(both, batch_size=16)
    err = float(np.abs(np.load(npy) - ref).max())
    ok = check(err <= 1e-5, f"the export in sentence-transformers: max |prune embed - encode| {err:.2e}")
    teacher = st.SentenceTransformer(folder, device="cpu").encode(both, batch_size=16)
    cos = float(np.mean(np.sum(ref * teacher, 1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(teacher, axis=1))))
    have = summary["final"]["metrics"]["mean_cosine_to_teacher"]
    return ok & check(abs(cos - have) <= 1e-5, f"mean cosine to the teacher {have:.6f}, sentence-transformers {cos:.6f}")
