#!/usr/bin/env python3
"""A tagger (token classification) read and scored by headprune against transformers and seqeval.

For each architecture (BERT with ../shared/vocab's WordPiece, RoBERTa's byte-level BPE, XLM-R's SentencePiece,
DistilBERT, ELECTRA; the last four from the arch-models fixture, tools/make_arch_models.py), builds a small random
*ForTokenClassification with transformers (5 BIO tags, its classifier drawn wide so that predictions vary) and
writes JSON lines of UD English EWT dev sentences with seeded BIO tags. `prune eval` on them must give:
  tags       per sentence, the tag transformers predicts at each word's first sub-token (BatchEncoding.word_ids of
             the words encoded with is_split_into_words, truncated at max_length), for every word that survives
             truncation: the alignment, the forward and the label order at once;
  metrics    accuracy over those words, and seqeval's f1_score, precision_score, recall_score of the same
             predictions (1e-12).
The pruning run of the BERT tagger: every curve point inside its bootstrap band, and transformers' accuracy of the
exported BertForTokenClassification equal to summary.json's. A model whose config.json names
*ForSequenceClassification is refused with the fix (prune.new_classifier).
With --python5 (the optional transformers 5 venv), only the pruning run, its export loaded by transformers 5 through
the folder's modeling file (trust_remote_code) and scored as with transformers 4.

    tagger_reference.py --python VENV_PYTHON --prune PRUNE --arch-models DIR --data ../shared/data --scratch DIR
                        [--python5 VENV5_PYTHON]
Exit 0 when every check holds, 1 when one fails, 77 (skipped) without the venv (or the transformers 5 one), seqeval or
the data.
"""
import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ref_check import expect, finish, start  # noqa: E402

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
MAX_LEN = 24  # short enough that some sentences lose words to truncation


def sentences(data, n):
    """The first n sentences of UD English EWT dev with 3 or more words, as word lists."""
    out, words = [], []
    with open(os.path.join(data, "ud_english_ewt", "en_ewt-ud-dev.conllu"), encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if len(words) >= 3:
                    out.append(words)
                words = []
                if len(out) == n:
                    break
            elif not line.startswith("#"):
                cols = line.split("\t")
                if cols[0].isdigit():
                    words.append(cols[1])
    return out


def bio(rng, n):
    """A tag sequence of n words: entities of one or more words, some I- runs left malformed on purpose."""
    tags, i = [], 0
    while i < n:
        r = rng.random()
        if r < 0.6:
            tags.append("O")
            i += 1
            continue
        kind = rng.choice(["PER", "LOC"])
        length = rng.randint(1, 3)
        for k in range(min(length, n - i)):
            tags.append(("B-" if k == 0 or r > 0.95 else "I-") + kind)
        i += length
    return tags[:n]


def make_model(arch, source, out, seed):
    """A random *ForTokenClassification of `arch` with source's sizes and tokenizer files, id2label TAGS."""
    import torch
    import transformers
    if arch == "bert":
        config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                                         num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)
    else:
        config = transformers.AutoConfig.from_pretrained(source)
    config.num_labels = len(TAGS)
    config.id2label = dict(enumerate(TAGS))
    config.label2id = {t: i for i, t in enumerate(TAGS)}
    torch.manual_seed(seed)
    model = transformers.AutoModelForTokenClassification.from_config(config).eval()
    with torch.no_grad():
        model.classifier.weight.normal_(0, 1.0)
    model.save_pretrained(out)
    for name in os.listdir(source):
        if name.startswith(("tokenizer", "vocab", "merges", "special_tokens", "sentencepiece")):
            shutil.copy(os.path.join(source, name), out)
    return model


def reference(model, model_dir, arch, rows):
    """transformers' tag at each kept word's first sub-token, per sentence."""
    import torch
    import transformers
    extra = {"add_prefix_space": True} if arch in ("roberta",) else {}
    tok = transformers.AutoTokenizer.from_pretrained(model_dir, **extra)
    out = []
    for words, _ in rows:
        enc = tok(words, is_split_into_words=True, truncation=True, max_length=MAX_LEN, return_tensors="pt")
        with torch.no_grad():
            logits = model(**{k: v for k, v in enc.items() if k != "token_type_ids" or arch != "distilbert"}).logits
        best = logits[0].argmax(-1).tolist()
        seen, tags = set(), []
        for pos, w in enumerate(enc.word_ids(0)):
            if w is not None and w not in seen:
                seen.add(w)
                tags.append(TAGS[best[pos]])
        out.append(tags)
    return out


def check_arch(args, arch, source, rows, seed):
    from seqeval.metrics import f1_score, precision_score, recall_score
    scratch = os.path.join(args.scratch, arch)
    model_dir = os.path.join(scratch, "model")
    model = make_model(arch, source, model_dir, seed)
    data = os.path.join(scratch, "dev.jsonl")
    with open(data, "w", encoding="utf-8") as f:
        for words, tags in rows:
            f.write(json.dumps({"tokens": words, "ner_tags": tags}, ensure_ascii=False) + "\n")
    result = os.path.join(scratch, "eval.json")
    cmd = [args.prune, "eval", "--model", model_dir, "--train-file", data, "--validation-file", data,
           "--max-seq-len", str(MAX_LEN), "--out", scratch, "--set", "eval.output=" + result]
    r = subprocess.run(cmd, capture_output=True, text=True)
    expect(r.returncode == 0, f"{arch}: prune eval exits 0" + (f" ({r.stderr.strip()[-400:]})" if r.returncode else ""))
    if r.returncode:
        return
    got = json.load(open(result))
    want = reference(model, model_dir, arch, rows)
    same = sum(g == w for g, w in zip(got["tags"], want))
    expect(len(got["tags"]) == len(want) and same == len(want),
           f"{arch}: predicted tags of {same}/{len(want)} sentences equal transformers' at word_ids' first sub-tokens")
    gold = [tags[:len(w)] for (_, tags), w in zip(rows, want)]  # the words truncation kept
    flat_g = [t for s in gold for t in s]
    flat_p = [t for s in want for t in s]
    accuracy = sum(a == b for a, b in zip(flat_g, flat_p)) / len(flat_g)
    ref = {"accuracy": accuracy, "entity_f1": f1_score(gold, want), "entity_precision": precision_score(gold, want),
           "entity_recall": recall_score(gold, want)}
    for name, value in ref.items():
        expect(abs(got["metrics"].get(name, float("nan")) - value) <= 1e-12,
               f"{arch}: {name} {got['metrics'].get(name)} equals the reference's {value:.12g}")
    truncated = sum(len(w) < len(words) for (words, _), w in zip(rows, want))
    expect(truncated > 0, f"{arch}: {truncated} sentences lose words to max_length {MAX_LEN} (truncation exercised)")


def check_pruning_run(args, rows):
    """The pruning run of the BERT tagger (pruned as it is: its head holds the tags): every curve point's bootstrap
    band holds its metric, and transformers' tags from the exported …ForTokenClassification score what summary.json
    reports."""
    import csv
    import transformers
    scratch = os.path.join(args.scratch, "bert")
    data, run = os.path.join(scratch, "dev.jsonl"), os.path.join(scratch, "run")
    cmd = [args.prune, "--model", os.path.join(scratch, "model"), "--train-file", data, "--validation-file", data,
           "--max-seq-len", str(MAX_LEN), "--out", run, "--target-heads", "5", "--criteria", "taylor,lrp,random,loo",
           "--recover-steps", "4", "--set", "prune.select_examples=0", "--set", "prune.rank_examples=16",
           "--set", "data.metric=accuracy"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    expect(r.returncode == 0, "bert: the pruning run exits 0" + (f" ({r.stderr.strip()[-600:]})" if r.returncode else ""))
    if r.returncode:
        return
    points = list(csv.DictReader(open(os.path.join(run, "curves.csv"))))
    inside = [p for p in points if float(p["accuracy_ci_lo"]) - 1e-9 <= float(p["accuracy_mean"])
              <= float(p["accuracy_ci_hi"]) + 1e-9]
    expect(len(points) > 0 and len(inside) == len(points),
           f"bert: {len(inside)}/{len(points)} curve points lie inside their bootstrap band")
    summary = json.load(open(os.path.join(run, "summary.json")))
    exported = os.path.join(run, "model")
    model = transformers.AutoModelForTokenClassification.from_pretrained(exported).eval()
    expect(type(model).__name__ == "BertForTokenClassification", f"bert: the export loads as {type(model).__name__}")
    want = reference(model, exported, "bert", rows)
    gold = [tags[:len(w)] for (_, tags), w in zip(rows, want)]
    flat = [(g, p) for gs, ps in zip(gold, want) for g, p in zip(gs, ps)]
    accuracy = sum(g == p for g, p in flat) / len(flat)
    got = summary["final"]["metrics"]["accuracy"]
    expect(abs(got - accuracy) <= 1e-12,
           f"bert: the exported tagger's accuracy in transformers {accuracy:.12g} is summary.json's {got}")
    if not args.python5:
        return
    tags5, cls = tags_in_transformers5(args.python5, exported, rows, scratch)
    if tags5 is None:
        return
    expect(cls == "HeadpruneBertForTokenClassification", f"bert: transformers 5 loads the export as {cls}")
    flat5 = [(g, p) for gs, ps in zip(gold, tags5) for g, p in zip(gs, ps)]
    accuracy5 = sum(g == p for g, p in flat5) / len(flat5) if flat5 else float("nan")
    expect(tags5 == want and abs(got - accuracy5) <= 1e-12,
           f"bert: transformers 5's tags equal transformers 4's in every sentence, accuracy {accuracy5:.12g} is "
           f"summary.json's {got}")


def tags_in_transformers5(python5, exported, rows, scratch):
    """transformers 5's tags of `rows` from the export (this script run under `python5` with --tags-of), and the class
    it loaded."""
    path, out = os.path.join(scratch, "rows.json"), os.path.join(scratch, "tags5.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(rows, f)
    env = dict(os.environ, HP_REF_CHECK_CHILD="1")
    r = subprocess.run([python5, os.path.abspath(__file__), "--tags-of", exported, "--rows", path, "--out", out],
                       capture_output=True, text=True, env=env)
    expect(r.returncode == 0, "bert: transformers 5 tags the export" + (f" ({r.stderr.strip()[-600:]})" if r.returncode else ""))
    if r.returncode:
        return None, None
    got = json.load(open(out))
    return got["tags"], got["class"]


def tags_of(argv):
    """--tags-of EXPORT --rows ROWS --out OUT: this Python's transformers' tags of ROWS from EXPORT (its own modeling
    file trusted), with the class it loaded, as JSON."""
    import argparse
    import transformers
    ap = argparse.ArgumentParser()
    for flag in ("tags-of", "rows", "out"):
        ap.add_argument("--" + flag, required=True)
    a = ap.parse_args(argv)
    model = transformers.AutoModelForTokenClassification.from_pretrained(a.tags_of, trust_remote_code=True).eval()
    rows = json.load(open(a.rows))
    with open(a.out, "w") as f:
        json.dump({"tags": reference(model, a.tags_of, "bert", rows), "class": type(model).__name__,
                   "transformers": transformers.__version__}, f)
    return 0


def check_refusal(args, rows):
    """A sequence classifier with a tagger's data: refused in one line naming the fix."""
    import transformers
    out = os.path.join(args.scratch, "sequence")
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=37, num_labels=len(TAGS))
    transformers.BertForSequenceClassification(config).save_pretrained(out)
    shutil.copy(os.path.join(args.data, "..", "vocab", "vocab.txt"), out)
    data = os.path.join(args.scratch, "bert", "dev.jsonl")
    r = subprocess.run([args.prune, "eval", "--model", out, "--train-file", data, "--validation-file", data,
                        "--out", args.scratch], capture_output=True, text=True)
    last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    expect(r.returncode == 1 and "BertForTokenClassification" in last and "new_classifier" in last,
           f"a sequence classifier on a tagger's data exits 1, a model error (got {r.returncode}) naming the fix: {last}")


def main():
    if "--tags-of" in sys.argv:
        return tags_of(sys.argv[1:])
    args, _ = start(("prune", "arch-models", "data", "scratch"), ("seqeval", "transformers"),
                    "scripts/setup_python.sh installs both", optional=("python5",))
    if not os.path.isdir(os.path.join(args.data, "ud_english_ewt")):
        print(f"skipped: no UD English EWT under {args.data}")
        return 77
    if args.python5 and not os.path.exists(args.python5):
        print(f"skipped: no transformers 5 reference at {args.python5} (scripts/setup_python.sh --v5 makes it)")
        return 77
    rng = random.Random(3)
    rows = [(words, bio(rng, len(words))) for words in sentences(args.data, 40)]
    sources = {"bert": os.path.join(args.data, "..", "vocab")}
    if not args.python5:  # the transformers 5 check reads the BERT tagger's pruning run alone
        for arch in ("roberta", "xlm-roberta", "distilbert", "electra"):
            sources[arch] = os.path.join(args.arch_models, arch)
    for seed, (arch, source) in enumerate(sources.items()):
        check_arch(args, arch, source, rows, seed)
    check_pruning_run(args, rows)
    if not args.python5:
        check_refusal(args, rows)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
