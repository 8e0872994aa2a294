#!/usr/bin/env python3
"""Hugging Face reference ids for the C++ WordPiece tokenizer (core/text/tokenizer.h).

Pinned: transformers==4.40.2 tokenizers==0.19.1 (venv: /root/.cache/headprune/venv).
Reads every text of the GLUE splits, the MNLI TextFooler subset and the UD EWT '# text =' lines
under --data, encodes them with BertTokenizerFast (vocab in --vocab) and writes one JSON line per
input to --out/<source>.jsonl:
  {"src": "glue/RTE/dev.tsv:2", "a": ..., "b": ... or null,
   "ids": [...], "type_ids": [...],            # no truncation, specials included
   "keep": {"128": [kept_a, kept_b], ...}}     # word pieces HF keeps under longest_first
The truncated HF encodings are checked here to equal [CLS] a[:kept_a] [SEP] b[:kept_b] [SEP], so
the "keep" lengths reproduce them exactly. --out/manifest.json lists the files and row counts.
The slow BertTokenizer is spot-checked on every --slow-every'th row (untruncated ids).
Files are split on tabs only (no CSV quoting): QNLI, RTE and MNLI hold unbalanced quotes.
"""
import argparse
import json
import os
import shutil
import sys

# Truncation lengths checked; 24 makes longest_first (and its tie rule) fire on most pairs.
MAX_LENS = (128, 24)

# (file under --data, header?, column of text a, column of text b or None).
# Columns are header names when the file has a header, else 0-based indices.
SOURCES = [
    ("glue/SST-2/train.tsv", True, "sentence", None),
    ("glue/SST-2/dev.tsv", True, "sentence", None),
    ("glue/SST-2/test.tsv", True, "sentence", None),
    ("glue/CoLA/train.tsv", False, 3, None),
    ("glue/CoLA/dev.tsv", False, 3, None),
    ("glue/CoLA/test.tsv", True, "sentence", None),
    ("glue/MRPC/train.tsv", True, "#1 String", "#2 String"),
    ("glue/MRPC/dev.tsv", True, "#1 String", "#2 String"),
    ("glue/MRPC/test.tsv", True, "#1 String", "#2 String"),
    ("glue/RTE/train.tsv", True, "sentence1", "sentence2"),
    ("glue/RTE/dev.tsv", True, "sentence1", "sentence2"),
    ("glue/RTE/test.tsv", True, "sentence1", "sentence2"),
    ("glue/STS-B/train.tsv", True, "sentence1", "sentence2"),
    ("glue/STS-B/dev.tsv", True, "sentence1", "sentence2"),
    ("glue/STS-B/test.tsv", True, "sentence1", "sentence2"),
    ("glue/WNLI/train.tsv", True, "sentence1", "sentence2"),
    ("glue/WNLI/dev.tsv", True, "sentence1", "sentence2"),
    ("glue/WNLI/test.tsv", True, "sentence1", "sentence2"),
    ("glue/QNLI/dev.tsv", True, "question", "sentence"),
    ("glue/QNLI/test.tsv", True, "question", "sentence"),
    ("mnli_subset_textfooler/mnli.tsv", False, 1, 2),
    ("mnli_subset_textfooler/mnli_matched.tsv", False, 1, 2),
    ("mnli_subset_textfooler/mnli_mismatched.tsv", False, 1, 2),
    ("ud_english_ewt/en_ewt-ud-train.conllu", None, None, None),
    ("ud_english_ewt/en_ewt-ud-dev.conllu", None, None, None),
    ("ud_english_ewt/en_ewt-ud-test.conllu", None, None, None),
]


def read_rows(path, header, col_a, col_b):
    """Yields (line_number, text_a, text_b) with 1-based line numbers."""
    with open(path, "rb") as f:
        lines = f.read().decode("utf-8-sig").split("\n")  # utf-8-sig drops MRPC's BOM
    if header is None:  # CoNLL-U
        for i, line in enumerate(lines, 1):
            if line.startswith("# text = "):
                yield i, line[len("# text = "):].rstrip("\r"), None
        return
    start = 0
    if header:
        names = lines[0].rstrip("\r").split("\t")
        col_a = names.index(col_a)
        col_b = names.index(col_b) if col_b is not None else None
        start = 1
    need = max(col_a, col_b if col_b is not None else 0)
    for i, line in enumerate(lines[start:], start + 1):
        if not line:
            continue
        fields = line.rstrip("\r").split("\t")
        if len(fields) <= need:
            raise SystemExit(f"{path}:{i}: {len(fields)} fields, need {need + 1}; fix the file")
        yield i, fields[col_a], fields[col_b] if col_b is not None else None


def encode_all(tok, texts_a, texts_b, **kw):
    if texts_b is None:
        return tok(texts_a, add_special_tokens=True, **kw)
    return tok(texts_a, texts_b, add_special_tokens=True, **kw)


def kept_lengths(ids, type_ids, full_ids, full_type_ids, cls_id, sep_id, where):
    """(kept_a, kept_b) of a truncated encoding, checked to be a prefix of the full one."""
    n_a_full = full_type_ids.count(0) - 2
    kept_a = type_ids.count(0) - 2
    kept_b = max(type_ids.count(1) - 1, 0)
    full_a = full_ids[1:1 + n_a_full]
    full_b = full_ids[n_a_full + 2:-1] if 1 in full_type_ids else []
    rebuilt = [cls_id] + full_a[:kept_a] + [sep_id]
    if 1 in full_type_ids:
        rebuilt += full_b[:kept_b] + [sep_id]
    if rebuilt != ids:
        raise SystemExit(f"{where}: HF truncation is not a prefix of the full encoding")
    return [kept_a, kept_b]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=os.path.join(root, "..", "shared", "data"))
    p.add_argument("--vocab", default=os.path.join(root, "..", "shared", "vocab"))
    p.add_argument("--out", required=True, help="output folder (e.g. build/tokref)")
    p.add_argument("--if-missing", action="store_true", help="do nothing when --out is complete")
    p.add_argument("--optional", action="store_true",
                   help="exit 0 without writing anything when transformers is not installed")
    p.add_argument("--slow-every", type=int, default=97, help="check slow tokenizer on 1/N rows")
    args = p.parse_args()

    if args.if_missing and os.path.exists(os.path.join(args.out, "manifest.json")):
        print(f"tokenizer_reference: {args.out} already complete")
        return 0

    try:
        import tokenizers
        import transformers
        from transformers import BertTokenizer, BertTokenizerFast
    except ImportError as e:
        # --optional (the ctest fixture): the parity test then skips with a warning.
        print(f"tokenizer_reference: {e}; pip install transformers==4.40.2 tokenizers==0.19.1",
              file=sys.stderr)
        return 0 if args.optional else 1

    fast = BertTokenizerFast.from_pretrained(args.vocab)
    slow = BertTokenizer.from_pretrained(args.vocab)
    transformers.logging.set_verbosity_error()  # longest_first warns once per batch otherwise
    cls_id, sep_id = fast.cls_token_id, fast.sep_token_id

    tmp = args.out.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    manifest = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                "vocab": os.path.abspath(args.vocab), "max_lens": list(MAX_LENS), "files": {}}
    n_slow = n_slow_bad = 0
    for rel, header, col_a, col_b in SOURCES:
        rows = list(read_rows(os.path.join(args.data, rel), header, col_a, col_b))
        a = [r[1] for r in rows]
        b = [r[2] for r in rows] if col_b is not None else None
        full = encode_all(fast, a, b)
        trunc = {m: encode_all(fast, a, b, truncation="longest_first", max_length=m)
                 for m in MAX_LENS}
        name = rel.replace("/", "_").rsplit(".", 1)[0] + ".jsonl"
        with open(os.path.join(tmp, name), "w", encoding="utf-8") as out:
            for k, (line, ta, tb) in enumerate(rows):
                where = f"{rel}:{line}"
                ids, tt = full["input_ids"][k], full["token_type_ids"][k]
                keep = {str(m): kept_lengths(trunc[m]["input_ids"][k], trunc[m]["token_type_ids"][k],
                                             ids, tt, cls_id, sep_id, where) for m in MAX_LENS}
                rec = {"src": where, "a": ta, "b": tb, "ids": ids, "type_ids": tt, "keep": keep}
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
                if args.slow_every > 0 and k % args.slow_every == 0:
                    s = slow(ta, tb) if tb is not None else slow(ta)
                    n_slow += 1
                    if s["input_ids"] != ids or s["token_type_ids"] != tt:
                        n_slow_bad += 1
                        print(f"slow/fast differ at {where}: {ta!r} {tb!r}", file=sys.stderr)
        manifest["files"][name] = len(rows)
        print(f"tokenizer_reference: {rel}: {len(rows)} rows", file=sys.stderr)
    manifest["slow_checked"] = n_slow
    manifest["slow_mismatches"] = n_slow_bad
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    shutil.rmtree(args.out, ignore_errors=True)
    os.rename(tmp, args.out)  # complete folder appears atomically
    total = sum(manifest["files"].values())
    print(f"tokenizer_reference: {total} rows in {len(SOURCES)} files; slow tokenizer agrees on "
          f"{n_slow - n_slow_bad}/{n_slow} sampled rows", file=sys.stderr)
    # Slow/fast differences are reported, not fatal: the C++ tokenizer follows the fast one.
    return 0


if __name__ == "__main__":
    sys.exit(main())
