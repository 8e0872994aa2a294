#!/usr/bin/env python3
"""Hugging Face reference ids for the C++ tokenizers (core/text/tokenizer.h).

Pinned: transformers==4.40.2 tokenizers==0.19.1 sentencepiece==0.1.97 (venv: /root/.cache/headprune/venv).
Reads every text of the GLUE splits, the MNLI TextFooler subset and the UD EWT '# text =' lines
under --data, encodes them with one HF tokenizer and writes one JSON line per input to --out/<source>.jsonl:
  {"src": "glue/RTE/dev.tsv:2", "a": ..., "b": ... or null,
   "ids": [...], "type_ids": [...],            # no truncation, specials included
   "keep": {"128": [kept_a, kept_b], ...}}     # pieces HF keeps under longest_first
(bpe and spm records also hold "n": [pieces of a, pieces of b], which locate a and b in "ids").
--out/manifest.json lists the files and row counts. The tokenizer, by --kind:
  wordpiece (default)  BertTokenizerFast of the vocab in --vocab. The truncated HF encodings are checked
                       here to equal [CLS] a[:kept_a] [SEP] b[:kept_b] [SEP]. The slow BertTokenizer is
                       spot-checked on every --slow-every'th row (untruncated ids).
  bpe                  RobertaTokenizerFast of --tokenizer-dir (tools/train_tokenizers.py: roberta_tok).
                       Truncated: <s> a[:kept_a] </s></s> b[:kept_b] </s>; type ids all 0. The slow
                       RobertaTokenizer is spot-checked as for wordpiece.
  spm                  XLMRobertaTokenizer (slow: the SentencePiece library, as the C++ code) of
                       --tokenizer-dir (xlmr_tok); layout as bpe. The kept lengths are those of
                       XLMRobertaTokenizerFast (tokenizers' longest_first rule, which the C++ follows; the slow
                       tokenizer gives the odd piece to the other input, counted as slow_truncation_differs
                       on every --slow-every'th pair row).
                       Every text is also encoded by the fast tokenizer: it differs from the slow one where
                       the Unigram lattice has two segmentations of equal score (runs of one character:
                       "zzzzzzzzz" -> slow zz zz z zz zz, fast z zz zz zz zz; "8000" -> slow 8 00 0, fast
                       8 0 00): SentencePiece and tokenizers break Viterbi ties differently. Those texts are
                       counted (fast_differs, fast_differs_examples in the manifest); the reference is slow.
Files are split on tabs only (no CSV quoting): QNLI, RTE and MNLI hold unbalanced quotes.
"""
import argparse
import json
import os
import shutil
import sys

import fixture_stamp

# Truncation lengths checked; 24 makes longest_first (and its tie rule) fire on most pairs.
MAX_LENS = (128, 24)
# RoBERTa and XLM-R pairs hold 4 specials, so 128 and 24 leave even budgets, where the tie rule never
# decides: 25 (a budget of 21) makes it decide.
ROBERTA_MAX_LENS = MAX_LENS + (25,)

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


def truncated(tok, a, b, lengths, m):
    """HF's longest_first encodings at max_length m of the rows whose full encoding (`lengths`, specials
    included) is longer than m, as {row: input ids (and type ids when the tokenizer gives them)}. A row that fits
    is not asked: HF's truncation returns a sequence within max_length as it is, so its kept lengths are its
    whole lengths (the wordpiece path checks that on a sample, check_fitting_rows)."""
    rows = [k for k, n in enumerate(lengths) if n > m]
    if not rows:
        return {}
    enc = encode_all(tok, [a[k] for k in rows], [b[k] for k in rows] if b is not None else None,
                     truncation="longest_first", max_length=m)
    types = enc.get("token_type_ids")
    return {k: (enc["input_ids"][i], types[i] if types is not None else None) for i, k in enumerate(rows)}


def check_fitting_rows(tok, a, b, lengths, m, where, every=97):
    """The claim truncated() rests on, tested on every `every`th fitting row: HF's truncation leaves it whole."""
    for k in range(0, len(lengths), every):
        if lengths[k] <= m:
            enc = encode_all(tok, [a[k]], [b[k]] if b is not None else None, truncation="longest_first",
                             max_length=m)["input_ids"][0]
            whole = encode_all(tok, [a[k]], [b[k]] if b is not None else None)["input_ids"][0]
            if enc != whole:
                raise SystemExit(f"{where}:{k}: HF truncation at {m} changed a row of {lengths[k]} ids")


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


def roberta_layout(cls_id, sep_id, a, b, keep_a=None, keep_b=None):
    """<s> a </s> or <s> a </s></s> b </s>, a and b cut to keep_a and keep_b when given."""
    ids = [cls_id] + a[:keep_a] + [sep_id]
    if b is not None:
        ids += [sep_id] + b[:keep_b] + [sep_id]
    return ids


def roberta_kept(trunc, a, b, cls_id, sep_id, where):
    """(kept_a, kept_b) whose layout rebuilds the truncated encoding `trunc` from the parts a and b."""
    n = len(trunc) - (4 if b is not None else 2)
    for ka in range(min(n, len(a)) + 1):
        kb = n - ka
        if (b is None and kb == 0) or (b is not None and kb <= len(b)):
            if roberta_layout(cls_id, sep_id, a, b, ka, kb) == trunc:
                return [ka, kb]
    raise SystemExit(f"{where}: HF truncation is not <s> a[:i] </s>(</s> b[:j] </s>)")


def load_roberta_style(kind, folder):
    """(reference tokenizer, fast tokenizer, slow tokenizer or None) for --kind bpe or spm."""
    if kind == "bpe":
        from transformers import RobertaTokenizer, RobertaTokenizerFast
        return RobertaTokenizerFast.from_pretrained(folder), None, RobertaTokenizer.from_pretrained(folder)
    from transformers import XLMRobertaTokenizer, XLMRobertaTokenizerFast
    slow = XLMRobertaTokenizer.from_pretrained(folder)
    return slow, XLMRobertaTokenizerFast.from_pretrained(folder), None


def pieces(ref_tok, ref_is_slow, texts, every, where):
    """The reference's ids of each text without specials. spm: XLMRobertaTokenizer's own steps done in a batch
    (SentencePiece's EncodeAsPieces, then its _convert_token_to_id: fairseq's fixed ids, else the SentencePiece id
    + fairseq_offset, 0 -> <unk>) for texts holding none of its added tokens (those go through the tokenizer),
    and the tokenizer itself on every `every`th text, which must agree: 30 s of per-text Python less."""
    if not ref_is_slow:
        return ref_tok(texts, add_special_tokens=False)["input_ids"]
    sp, fixed, offset = ref_tok.sp_model, ref_tok.fairseq_tokens_to_ids, ref_tok.fairseq_offset
    added = [t for t in ref_tok.get_added_vocab() if t]
    unk = ref_tok.unk_token_id
    out = []
    for k, piece_list in enumerate(sp.encode(texts, out_type=str)):
        if any(t in texts[k] for t in added):
            out.append(ref_tok(texts[k], add_special_tokens=False)["input_ids"])
            continue
        ids = [fixed[p] if p in fixed else (i + offset if (i := sp.PieceToId(p)) else unk) for p in piece_list]
        if every > 0 and k % every == 0 and ids != ref_tok(texts[k], add_special_tokens=False)["input_ids"]:
            raise SystemExit(f"{where}: row {k}: SentencePiece's batch path differs from XLMRobertaTokenizer; "
                             "fix pieces() in tools/tokenizer_reference.py")
        out.append(ids)
    return out


def write_roberta_style(args, tmp, manifest):
    """The bpe and spm references (see the docstring). Returns the count of slow spot checks that differ."""
    ref_tok, fast, slow = load_roberta_style(args.kind, args.tokenizer_dir)
    ref_is_slow = fast is not None  # spm: the slow tokenizer is the reference
    fast = fast or ref_tok
    cls_id, sep_id = ref_tok.cls_token_id, ref_tok.sep_token_id
    counts = {"slow_checked": 0, "slow_mismatches": 0, "fast_differs": 0, "slow_truncation_differs": 0}
    examples = []
    for rel, header, col_a, col_b in SOURCES:
        rows = list(read_rows(os.path.join(args.data, rel), header, col_a, col_b))
        a = [r[1] for r in rows]
        b = [r[2] for r in rows] if col_b is not None else None
        parts_a = pieces(ref_tok, ref_is_slow, a, args.slow_every, rel)
        parts_b = pieces(ref_tok, ref_is_slow, b, args.slow_every, rel) if b is not None else None
        if ref_is_slow:  # its __call__ adds the specials with this very method: called on the pieces, not re-tokenized
            full = [ref_tok.build_inputs_with_special_tokens(pa, parts_b[k] if b is not None else None)
                    for k, pa in enumerate(parts_a)]
            fast_a = fast(a, add_special_tokens=False)["input_ids"]
            fast_b = fast(b, add_special_tokens=False)["input_ids"] if b is not None else None
        else:  # bpe: the reference is the fast tokenizer, whose pieces are parts_a and parts_b already
            full = encode_all(ref_tok, a, b)["input_ids"]
            fast_a, fast_b = parts_a, parts_b
        lengths = [len(fa) + (len(fast_b[k]) + 2 if b is not None else 0) + 2 for k, fa in enumerate(fast_a)]
        trunc = {m: truncated(fast, a, b, lengths, m) for m in ROBERTA_MAX_LENS}
        name = rel.replace("/", "_").rsplit(".", 1)[0] + ".jsonl"
        with open(os.path.join(tmp, name), "w", encoding="utf-8") as out:
            for k, (line, ta, tb) in enumerate(rows):
                where = f"{rel}:{line}"
                pa, pb = parts_a[k], parts_b[k] if b is not None else None
                if roberta_layout(cls_id, sep_id, pa, pb) != full[k]:
                    raise SystemExit(f"{where}: HF encoding is not <s> a </s>(</s> b </s>)")
                fa, fb = fast_a[k], fast_b[k] if b is not None else None
                if (fa, fb) != (pa, pb):
                    counts["fast_differs"] += 1
                    if len(examples) < 10:
                        examples.append({"src": where, "text": ta if fa != pa else tb})
                    if len(fa) != len(pa) or (fb is not None and len(fb) != len(pb)):
                        raise SystemExit(f"{where}: fast and slow differ in length; kept lengths unknown")
                whole = roberta_layout(cls_id, sep_id, fa, fb)
                keep = {str(m): roberta_kept(trunc[m][k][0] if k in trunc[m] else whole, fa, fb, cls_id, sep_id,
                                             where) for m in ROBERTA_MAX_LENS}
                rec = {"src": where, "a": ta, "b": tb, "ids": full[k], "type_ids": [0] * len(full[k]),
                       "n": [len(pa), len(pb) if pb is not None else 0], "keep": keep}
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
                check_slow(args, slow, ref_tok, rec, k, counts, where)
        manifest["files"][name] = len(rows)
        print(f"tokenizer_reference: {rel}: {len(rows)} rows", file=sys.stderr)
    manifest.update(counts)
    manifest["fast_differs_examples"] = examples
    manifest["tokenizer_dir"] = os.path.abspath(args.tokenizer_dir)
    manifest["kind"] = args.kind
    return counts["slow_mismatches"]


def check_slow(args, slow, ref_tok, rec, k, counts, where):
    """bpe: the slow tokenizer on 1/--slow-every rows. spm (slow is the reference): its own truncation rule on
    1/--slow-every pair rows (a count for the manifest, not a check: the C++ follows the fast tokenizer's rule)."""
    ta, tb = rec["a"], rec["b"]
    if slow is not None and args.slow_every > 0 and k % args.slow_every == 0:
        counts["slow_checked"] += 1
        s = slow(ta, tb) if tb is not None else slow(ta)
        if s["input_ids"] != rec["ids"]:
            counts["slow_mismatches"] += 1
            print(f"slow/fast differ at {where}: {ta!r} {tb!r}", file=sys.stderr)
    if slow is None and tb is not None and args.slow_every > 0 and k % args.slow_every == 0:
        (n_a, n_b), ids = rec["n"], rec["ids"]
        pa, pb = ids[1:1 + n_a], ids[n_a + 3:n_a + 3 + n_b]  # <s> a </s></s> b </s>: the reference's own pieces
        for m, (ka, kb) in rec["keep"].items():
            if n_a + n_b + 4 <= int(m):
                continue  # fits: neither rule cuts it
            got = ref_tok(ta, tb, truncation="longest_first", max_length=int(m))["input_ids"]
            if got != roberta_layout(ref_tok.cls_token_id, ref_tok.sep_token_id, pa, pb, ka, kb):
                counts["slow_truncation_differs"] += 1


def write_reference(args, write, manifest):
    """Runs write(tmp, manifest) -> slow mismatches, then moves tmp to --out with its manifest."""
    tmp = args.out.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    write(tmp, manifest)
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
    fixture_stamp.write(tmp, args.digest)
    shutil.rmtree(args.out, ignore_errors=True)
    os.rename(tmp, args.out)  # complete folder appears atomically
    total = sum(manifest["files"].values())
    extra = "".join(f", {k} {manifest[k]}" for k in ("slow_checked", "slow_mismatches", "fast_differs",
                                                      "slow_truncation_differs") if k in manifest)
    print(f"tokenizer_reference: {total} rows in {len(manifest['files'])} files ({args.kind}{extra})",
          file=sys.stderr)
    return 0


def stamp_of(args):
    """The input hash of this reference (tools/fixture_stamp.py): this script, the data files it reads, the
    vocabulary or tokenizer folder, the pins and the options."""
    inputs = [os.path.abspath(__file__)] + [os.path.join(args.data, rel) for rel, *_ in SOURCES]
    inputs.append(args.vocab if args.kind == "wordpiece" else args.tokenizer_dir)
    return fixture_stamp.input_hash(inputs, extra=[args.kind, args.slow_every,
                                                   *fixture_stamp.versions("transformers", "tokenizers", "sentencepiece")])


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=os.path.join(root, "..", "shared", "data"))
    p.add_argument("--vocab", default=os.path.join(root, "..", "shared", "vocab"))
    p.add_argument("--out", required=True, help="output folder (e.g. build/tokref)")
    p.add_argument("--if-missing", action="store_true",
                   help="do nothing when --out is complete and made from the same inputs (tools/fixture_stamp.py)")
    p.add_argument("--optional", action="store_true",
                   help="exit 0 without writing anything when transformers is not installed")
    p.add_argument("--slow-every", type=int, default=97, help="check slow tokenizer on 1/N rows")
    p.add_argument("--kind", choices=("wordpiece", "bpe", "spm"), default="wordpiece",
                   help="which HF tokenizer (see above)")
    p.add_argument("--tokenizer-dir", help="for --kind bpe/spm: the tokenizer folder (train_tokenizers.py)")
    args = p.parse_args()
    if args.kind != "wordpiece" and not args.tokenizer_dir:
        p.error(f"--kind {args.kind} needs --tokenizer-dir (tools/train_tokenizers.py writes one)")

    digest = stamp_of(args)
    if args.if_missing and fixture_stamp.is_current(args.out, digest):
        print(f"tokenizer_reference: {args.out} already made from these inputs ({digest[:12]})")
        return 0
    args.digest = digest

    try:
        import tokenizers
        import transformers
        from transformers import BertTokenizer, BertTokenizerFast
    except ImportError as e:
        # --optional (the ctest fixture): the parity test then skips with a warning.
        print(f"tokenizer_reference: {e}; pip install transformers==4.40.2 tokenizers==0.19.1",
              file=sys.stderr)
        return 0 if args.optional else 1

    transformers.logging.set_verbosity_error()  # longest_first warns once per batch otherwise
    if args.kind != "wordpiece":
        return write_reference(args, lambda tmp, manifest: write_roberta_style(args, tmp, manifest),
                               {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                                "max_lens": list(ROBERTA_MAX_LENS), "files": {}})
    fast = BertTokenizerFast.from_pretrained(args.vocab)
    slow = BertTokenizer.from_pretrained(args.vocab)
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
        lengths = [len(ids) for ids in full["input_ids"]]
        trunc = {m: truncated(fast, a, b, lengths, m) for m in MAX_LENS}
        for m in MAX_LENS:
            check_fitting_rows(fast, a, b, lengths, m, rel)
        name = rel.replace("/", "_").rsplit(".", 1)[0] + ".jsonl"
        with open(os.path.join(tmp, name), "w", encoding="utf-8") as out:
            for k, (line, ta, tb) in enumerate(rows):
                where = f"{rel}:{line}"
                ids, tt = full["input_ids"][k], full["token_type_ids"][k]
                keep = {str(m): kept_lengths(*trunc[m].get(k, (ids, tt)), ids, tt, cls_id, sep_id, where)
                        for m in MAX_LENS}
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
    fixture_stamp.write(tmp, args.digest)
    shutil.rmtree(args.out, ignore_errors=True)
    os.rename(tmp, args.out)  # complete folder appears atomically
    total = sum(manifest["files"].values())
    print(f"tokenizer_reference: {total} rows in {len(SOURCES)} files; slow tokenizer agrees on "
          f"{n_slow - n_slow_bad}/{n_slow} sampled rows", file=sys.stderr)
    # Slow/fast differences are reported, not fatal: the C++ tokenizer follows the fast one.
    return 0


if __name__ == "__main__":
    sys.exit(main())
