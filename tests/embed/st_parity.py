#!/usr/bin/env python3
"""`prune embed` against sentence-transformers itself (#59).

Builds tiny sentence-transformers folders with the package from the tiny BERT (tests/data/golden/tiny_bert) — one
per pooling mode (cls, max, mean, mean_sqrt_len, weightedmean, lasttoken) and a two-mode one (mean + max), each
with and without Normalize — and takes the real all-MiniLM-L6-v2 when it is linked (checkpoints/); for each, the
embeddings `prune embed` writes (.npy, batches of 7 so that rows are padded) must equal
SentenceTransformer(folder).encode() of the same sentences (SST-2 dev, varied lengths) within 1e-5. The .jsonl and
.h5 outputs of one folder must hold the same numbers. `prune eval --task stsb` on a folder (tiny mean + Normalize,
STS-B dev less the pairs whose cosines tie within 1e-5; the real model, 300 pairs) scores the cosine of the embeddings: its Spearman and Pearson must be
scipy's over sentence-transformers' pairwise cosines within 1e-4. `prune export --onnx` of a folder (unpruned and
slimmed) holds the pooling: ONNX Runtime on model.onnx equals encode() of the export within 1e-5; with --int8,
model.int8.onnx passes headprune's check against its own int8 and stays near encode() (mean cosine >= 0.98); with
a whole attention and a whole FFN emptied, ONNX Runtime's own quantize_dynamic of model.onnx runs too. `prune export --mask`
of a folder is a
sentence-transformers folder that SentenceTransformer loads (heads only: without remote code; with FFN neurons:
trust_remote_code=True; with hidden channels, the pooling 24 wide), its embeddings within 1e-5 of `prune embed`'s, its STS-B score the masked original's; the masked evaluation's mean cosine to the unmasked embeddings
sentence-transformers' own (export against original) within 1e-5. Exit 77 (CTest: skipped) without sentence-transformers.

Usage: $VENV/bin/python tests/embed/st_parity.py --prune build/bin/prune --scratch DIR
"""
import csv
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.dont_write_bytecode = True  # no tests/embed/__pycache__ in the source tree
from st_common import REPO, start, tiny_model  # noqa: E402

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


def run_embed(prune, folder, text_file, out, batch=7):
    cmd = [prune, "embed", "--model", folder, "--input", text_file, "--output", out, "--batch", str(batch)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-2000:]}")


def compare(name, ours, ref, what="prune embed"):
    if ours.shape != ref.shape:
        print(f"FAIL {name}: shape {ours.shape} against sentence-transformers' {ref.shape}")
        return False
    err = float(np.abs(ours - ref).max())
    ok = err <= TOL
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max |{what} - encode| {err:.2e} over {ours.shape}")
    return ok


def main():
    args, st, models = start()
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
    ok &= lowered_texts(args, st, texts, dict(folders)["tiny_mean_norm"])
    ok &= default_prompt(args, st, texts, dict(folders)["tiny_mean_norm"])
    ok &= transformer_subfolder(args, st, texts, dict(folders)["tiny_mean_norm"])
    ok &= sts_by_cosine(args, st, [(n, f) for n, f in folders if n in ("tiny_mean_norm", "all-MiniLM-L6-v2")])
    ok &= exports_load(args, st, texts, [(n, f) for n, f in folders if n in ("tiny_mean_norm", "all-MiniLM-L6-v2")])
    ok &= onnx_exports(args, st, texts, [(n, f) for n, f in folders if n in ONNX_FOLDERS])
    print("all equal within", TOL if ok else "")
    return 0 if ok else 1


def lowered_texts(args, st, texts, source):
    """A folder whose sentence_bert_config.json says do_lower_case over a cased tokenizer: sentence-transformers lowers
    each text before tokenizing, and so must prune embed (capitalised text; the cased tokenizer alone would read the
    capitals as [UNK])."""
    folder = os.path.join(args.scratch, "tiny_lower")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(source, folder)
    for name, key, value in (("sentence_bert_config.json", "do_lower_case", True),
                             ("tokenizer_config.json", "do_lower_case", False)):
        path = os.path.join(folder, name)
        config = json.load(open(path, encoding="utf-8"))
        config[key] = value
        json.dump(config, open(path, "w", encoding="utf-8"))
    upper = [t.upper() for t in texts]
    text_file = os.path.join(args.scratch, "upper.txt")
    with open(text_file, "w", encoding="utf-8") as f:
        f.write("\n".join(upper) + "\n")
    ref = st.SentenceTransformer(folder, device="cpu").encode(upper, batch_size=7, convert_to_numpy=True)
    unlowered = st.SentenceTransformer(folder, device="cpu")
    unlowered[0].do_lower_case = False
    gap = float(np.abs(unlowered.encode(upper, batch_size=7, convert_to_numpy=True) - ref).max())
    ok = check_gap = gap > 1e-2
    print(f"{'ok  ' if check_gap else 'FAIL'} tiny_lower: lowering moves sentence-transformers' embeddings by {gap:.2e}")
    out = os.path.join(args.scratch, "tiny_lower.npy")
    run_embed(args.prune, folder, text_file, out)
    ok &= compare("tiny_lower (do_lower_case, cased tokenizer, capitalised text)", np.load(out), ref)
    return ok


def default_prompt(args, st, texts, source):
    """A folder whose config_sentence_transformers.json names a default prompt (e5/bge style "query: "): encode()
    puts it before every text, and so must prune embed."""
    folder = os.path.join(args.scratch, "tiny_prompt")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(source, folder)
    path = os.path.join(folder, "config_sentence_transformers.json")
    config = json.load(open(path, encoding="utf-8")) if os.path.exists(path) else {}
    config.update({"prompts": {"query": "query: the film ", "passage": "passage: "}, "default_prompt_name": "query"})
    json.dump(config, open(path, "w", encoding="utf-8"))
    text_file = os.path.join(args.scratch, "prompt.txt")
    with open(text_file, "w", encoding="utf-8") as f:
        f.write("\n".join(texts) + "\n")
    model = st.SentenceTransformer(folder, device="cpu")
    ref = model.encode(texts, batch_size=7, convert_to_numpy=True)
    bare = model.encode(texts, batch_size=7, convert_to_numpy=True, prompt="")
    gap = float(np.abs(bare - ref).max())
    ok = gap > 1e-2
    print(f"{'ok  ' if ok else 'FAIL'} tiny_prompt: the default prompt moves sentence-transformers' embeddings by {gap:.2e}")
    out = os.path.join(args.scratch, "tiny_prompt.npy")
    run_embed(args.prune, folder, text_file, out)
    return compare("tiny_prompt (default_prompt_name)", np.load(out), ref) and ok


def transformer_subfolder(args, st, texts, source):
    """The older layout: the Transformer module in 0_Transformer/ (modules.json's path), the folder's root holding only
    modules.json and the other modules."""
    folder = os.path.join(args.scratch, "tiny_0_transformer")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(source, folder)
    inner = os.path.join(folder, "0_Transformer")
    os.makedirs(inner)
    for name in os.listdir(folder):
        if name not in ("modules.json", "0_Transformer", "config_sentence_transformers.json") and not name[0].isdigit():
            shutil.move(os.path.join(folder, name), inner)
    path = os.path.join(folder, "modules.json")
    modules = json.load(open(path, encoding="utf-8"))
    modules[0]["path"] = "0_Transformer"
    json.dump(modules, open(path, "w", encoding="utf-8"))
    ref = st.SentenceTransformer(folder, device="cpu").encode(texts, batch_size=7, convert_to_numpy=True)
    text_file = os.path.join(args.scratch, "sub.txt")
    with open(text_file, "w", encoding="utf-8") as f:
        f.write("\n".join(texts) + "\n")
    out = os.path.join(args.scratch, "tiny_0_transformer.npy")
    run_embed(args.prune, folder, text_file, out)
    return compare("tiny_0_transformer (the Transformer module in 0_Transformer/)", np.load(out), ref)


# Masks of the exports (prune eval/export --mask): heads only (transformers 4 loads it by config.pruned_heads, no
# remote code), and heads with FFN neurons and hidden channels (the folder's modeling_headprune.py:
# trust_remote_code=True).
EXPORT_MASKS = {"tiny_mean_norm": [("heads", "0:0,1;1:2", False), ("heads_neurons_hidden", "0:0;f1:0-9;hidden:0-7", True)],
                "all-MiniLM-L6-v2": [("heads_neurons", "0:0-5;3:1,2;f2:0-767;f5:100-1199", True)]}


def removed_hidden(mask):
    """The hidden channels a mask's "hidden:a-b,c" group removes."""
    out = set()
    for group in mask.split(";"):
        if group.startswith("hidden:"):
            for part in group[len("hidden:"):].split(","):
                a, _, b = part.partition("-")
                out.update(range(int(a), int(b or a) + 1))
    return out


def exports_load(args, st, texts, folders):
    """`prune export --mask` of a sentence-transformers folder is one: SentenceTransformer(export).encode must equal
    `prune embed` on the export within 1e-5, and the export must score on STS-B what the masked original scores."""
    ok = True
    for name, folder in folders:
        for tag, mask, remote in EXPORT_MASKS[name]:
            out = os.path.join(args.scratch, f"{name}_{tag}_export")
            cmd = [args.prune, "export", "--model", folder, "--mask", mask, "--to", out, "--force"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-2000:]}")
            ref = st.SentenceTransformer(out, device="cpu", trust_remote_code=remote).encode(texts, batch_size=7)
            npy = out + ".npy"
            run_embed(args.prune, out, os.path.join(args.scratch, "sentences.txt"), npy)
            ok &= compare(f"{name} export ({tag}) in sentence-transformers", np.load(npy), ref)
            root = os.path.join(args.scratch, name + "_data")
            if not os.path.isdir(root):
                root = os.path.join(REPO, "..", "shared", "data")
            scores, results = [], []
            for model, extra in ((folder, ["--mask", mask]), (out, [])):
                res = os.path.join(args.scratch, f"{name}_{tag}_{len(scores)}.json")
                cmd = [args.prune, "eval", "--model", model, "--task", "stsb", "--max-examples", "200", "--output",
                       res, "--data-root", root, *extra]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-2000:]}")
                results.append(json.load(open(res, encoding="utf-8"))["metrics"])
                scores.append(results[-1]["cosine_spearman"])
            good = abs(scores[0] - scores[1]) <= 1e-6
            ok &= good
            print(f"{'ok  ' if good else 'FAIL'} {name} export ({tag}): STS-B cosine Spearman {scores[1]:.6f}, the "
                  f"masked original {scores[0]:.6f}")
            # The masked evaluation's mean cosine to the unmasked embeddings: sentence-transformers' own, export
            # against original, over both sentences of the same 200 pairs.
            head, rows = stsb_rows(os.path.join(root, "glue", "STS-B", "dev.tsv"))
            both = [p[0] for p in pairs_of(head, rows[:200])] + [p[1] for p in pairs_of(head, rows[:200])]
            student = st.SentenceTransformer(out, device="cpu", trust_remote_code=remote).encode(both, convert_to_tensor=True)
            teacher = st.SentenceTransformer(folder, device="cpu").encode(both, convert_to_tensor=True)
            # Hidden channels removed: the export drops them where the masked original holds zeros.
            teacher_kept = teacher[:, [c for c in range(teacher.shape[1]) if c not in removed_hidden(mask)]]
            dots = (student * teacher_kept).sum(1) / (student.norm(dim=1) * teacher.norm(dim=1))
            want = float(dots.mean())
            have = results[0]["mean_cosine_to_unmasked"]
            good = abs(have - want) <= 1e-5 and "mean_cosine_to_unmasked" not in results[1]
            ok &= good
            print(f"{'ok  ' if good else 'FAIL'} {name} --mask ({tag}): mean cosine to the unmasked embeddings "
                  f"{have:.6f}, sentence-transformers {want:.6f}")
    return ok


# `prune export --onnx` of a sentence-transformers folder: model.onnx holds the encoder with its pooling and Normalize.
# Three pooling layouts, unpruned and slimmed (heads, FFN neurons and hidden channels: the remote-code encoder).
ONNX_FOLDERS = {"tiny_mean_norm": [None, "0:0;f1:0-9;hidden:0-7", "0:0-3;f1:0-36", "0:0-3"], "tiny_max": [None],
                "tiny_cls_norm": ["1:1-3;f0:5-30"]}
INT8_FOLDERS = {("tiny_mean_norm", "0:0;f1:0-9;hidden:0-7"), ("tiny_max", None)}  # also exported with --int8
# Layer 0's attention and layer 1's FFN emptied: the graph must hold no product with a zero-size weight, which ONNX
# Runtime's own quantize_dynamic fails on (an IndexError in its per-channel path). "0:0-3" empties the attention alone:
# no per-layer widths, so only a layer of 0 heads sends the export through headprune's modeling file.
EMPTIED = ("tiny_mean_norm", "0:0-3;f1:0-36")


def ort_quantizes(out, texts, model, ort):
    """ONNX Runtime's quantize_dynamic of the export's model.onnx runs, and its embeddings stay near encode()."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    q = os.path.join(out, "ort_int8.onnx")
    try:
        quantize_dynamic(os.path.join(out, "model.onnx"), q, weight_type=QuantType.QInt8, per_channel=True)
    except Exception as e:  # noqa: BLE001 - any failure of the third-party quantiser is the finding
        print(f"FAIL ONNX Runtime's quantize_dynamic of {out}/model.onnx: {type(e).__name__}: {e}")
        return False
    sess = ort.InferenceSession(q, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    feats = model.tokenize(texts[:64])
    got = sess.run(["sentence_embedding"], {k: v.numpy() for k, v in feats.items() if k in names})[0]
    ref = model.encode(texts[:64], batch_size=64)
    cos = float(((got * ref).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1))).mean())
    print(f"{'ok  ' if cos >= 0.98 else 'FAIL'} emptied sublayers: ONNX Runtime's quantize_dynamic runs on the export, "
          f"mean cosine to encode() {cos:.4f}")
    return cos >= 0.98


def int8_export(name, out, texts, model, sess_of):
    """model.int8.onnx (the pooling inside) against encode() of the float32 export: int8.json's check held (ONNX
    Runtime's int8 within mean cosine 0.999 of headprune's) and ONNX Runtime's int8 embeddings near the float32 ones."""
    info = json.load(open(os.path.join(out, "int8.json")))
    sess = sess_of(os.path.join(out, "model.int8.onnx"))
    names = {i.name for i in sess.get_inputs()}
    feats = model.tokenize(texts[:64])
    got = sess.run(["sentence_embedding"], {k: v.numpy() for k, v in feats.items() if k in names})[0]
    ref = model.encode(texts[:64], batch_size=64)
    cos = float(((got * ref).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1))).mean())
    good = info["mean_cosine_onnxruntime_to_headprune_int8"] >= 0.999 and cos >= 0.98 and \
        abs(info["onnxruntime_int8_cosine_to_fp32"] - cos) < 0.02 and "README.md" in os.listdir(out)
    print(f"{'ok  ' if good else 'FAIL'} {name} int8 ONNX: mean cosine to encode() {cos:.4f} (int8.json: "
          f"{info['onnxruntime_int8_cosine_to_fp32']:.4f}, mean to headprune's int8 "
          f"{info['mean_cosine_onnxruntime_to_headprune_int8']:.5f})")
    return good


def onnx_exports(args, st, texts, folders):
    """ONNX Runtime on the export's model.onnx against SentenceTransformer(export).encode, on the same sentences
    tokenized by the export's own tokenizer, within 1e-5."""
    try:
        import onnxruntime as ort
    except ImportError:
        print("note: onnxruntime is not installed: the ONNX exports are left out")
        return True
    ok = True
    for name, folder in folders:
        for mask in ONNX_FOLDERS[name]:
            out = os.path.join(args.scratch, f"{name}_onnx{'_masked' if mask else ''}")
            int8 = (name, mask) in INT8_FOLDERS
            cmd = [args.prune, "export", "--model", folder, "--to", out, "--force", "--onnx"] + (["--int8"] if int8 else [])
            cmd += ["--mask", mask] if mask else []
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-2000:]}")
            model = st.SentenceTransformer(out, device="cpu", trust_remote_code=bool(mask))
            ref = model.encode(texts, batch_size=7)
            sess = ort.InferenceSession(os.path.join(out, "model.onnx"), providers=["CPUExecutionProvider"])
            want = {i.name for i in sess.get_inputs()}
            got = []
            for i in range(0, len(texts), 7):  # batches padded to their longest, as encode pads them
                feats = model.tokenize(texts[i:i + 7])
                got.append(sess.run(["sentence_embedding"], {k: v.numpy() for k, v in feats.items() if k in want})[0])
            ok &= compare(f"{name} ONNX export{' (' + mask + ')' if mask else ''} in ONNX Runtime", np.concatenate(got),
                          ref, "ONNX Runtime")
            if (name, mask) == EMPTIED:
                ok &= ort_quantizes(out, texts, model, ort)
            if int8:
                ok &= int8_export(name, out, texts, model,
                                  lambda p: ort.InferenceSession(p, providers=["CPUExecutionProvider"]))
    return ok


STSB_DEV = os.path.join(REPO, "..", "shared", "data", "glue", "STS-B", "dev.tsv")


def stsb_rows(path=STSB_DEV):
    """STS-B dev's header and rows, read as csv's tab dialect reads them."""
    with open(path, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return rows[0], rows[1:]


def pairs_of(head, rows):
    a, b, y = head.index("sentence1"), head.index("sentence2"), head.index("score")
    return [(r[a], r[b], float(r[y])) for r in rows]


def cosines(model, pairs):
    from sentence_transformers import util
    e1 = model.encode([p[0] for p in pairs], batch_size=32, convert_to_tensor=True)
    e2 = model.encode([p[1] for p in pairs], batch_size=32, convert_to_tensor=True)
    return util.pairwise_cos_sim(e1, e2).numpy()


def separated_stsb(model, root):
    """A data root whose STS-B dev holds only the pairs whose cosine lies more than 1e-5 from every other's: the tiny
    model maps many sentences to the same [UNK]s, and the float noise of tied cosines would reorder them."""
    head, rows = stsb_rows()
    cos = cosines(model, pairs_of(head, rows))
    order = np.argsort(cos)
    gaps = np.diff(cos[order])
    keep = np.ones(len(rows), dtype=bool)
    keep[order[:-1][gaps <= 1e-5]] = False
    keep[order[1:][gaps <= 1e-5]] = False
    folder = os.path.join(root, "glue", "STS-B")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "dev.tsv"), "w", encoding="utf-8") as f:
        for r in [head] + [r for r, k in zip(rows, keep) if k]:
            f.write("\t".join(r) + "\n")
    return int(keep.sum())


def sts_by_cosine(args, st, folders):
    """`prune eval --task stsb` on a sentence-transformers folder scores the cosine of the embeddings (MTEB's way):
    its Spearman and Pearson must be scipy's over SentenceTransformer.encode's pairwise cosines."""
    from scipy import stats
    ok = True
    for name, folder in folders:
        model = st.SentenceTransformer(folder, device="cpu")
        root = os.path.join(REPO, "..", "shared", "data")
        if name.startswith("tiny"):
            root = os.path.join(args.scratch, name + "_data")
            n = separated_stsb(model, root)
        else:
            n = 300
        head, rows = stsb_rows(os.path.join(root, "glue", "STS-B", "dev.tsv"))
        pairs = pairs_of(head, rows[:n])
        cos = cosines(model, pairs)
        gold = [p[2] for p in pairs]
        ref = {"cosine_spearman": stats.spearmanr(cos, gold)[0], "cosine_pearson": stats.pearsonr(cos, gold)[0]}
        out = os.path.join(args.scratch, name + "_stsb.json")
        cmd = [args.prune, "eval", "--model", folder, "--task", "stsb", "--max-examples", str(n), "--output", out,
               "--data-root", root]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-2000:]}")
        got = json.load(open(out, encoding="utf-8"))
        for key, want in ref.items():
            have = got["metrics"][key]
            good = abs(have - want) <= 1e-4 and got["examples"] == n
            ok &= good
            print(f"{'ok  ' if good else 'FAIL'} {name} stsb dev ({n} pairs) {key}: prune eval {have:.6f}, "
                  f"sentence-transformers + scipy {want:.6f}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
