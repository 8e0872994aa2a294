"""What the sentence-transformers tests share (#59): their start (arguments, the package or exit 77, a fresh scratch
folder) and the tiny folders they build with the package itself from the tiny BERT."""
import argparse
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
