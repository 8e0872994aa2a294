#!/usr/bin/env python3
"""Small RoBERTa and XLM-R tokenizers trained on GLUE text: the fixtures of the C++ byte-level BPE and
SentencePiece tokenizers (core/text/bpe.cpp, core/text/sentencepiece_model.cpp).

No real RoBERTa or XLM-R vocabulary is on the machine, so this trains both, deterministically, on the
text of the GLUE training splits under --data (the train.tsv files of tools/tokenizer_reference.py's
SOURCES):
  OUT/roberta_tok/  tokenizers.ByteLevelBPETokenizer (vocab 4000, min_frequency 2, specials <s> <pad>
                    </s> <unk> <mask>), saved by RobertaTokenizerFast.save_pretrained: vocab.json,
                    merges.txt, tokenizer.json, tokenizer_config.json, special_tokens_map.json
  OUT/xlmr_tok/     a SentencePiece unigram model (vocab 4000, one thread, character_coverage 0.9995 so
                    that rare characters are <unk>), saved by XLMRobertaTokenizer.save_pretrained:
                    sentencepiece.bpe.model, tokenizer_config.json, special_tokens_map.json
Each folder appears atomically (written as NAME.tmp, then renamed). --if-missing skips a folder that
exists; tools/make_arch_models.py calls it that way. About 20 s on one core.

    ~/.cache/headprune/venv/bin/python tools/train_tokenizers.py --out DIR [--data ../shared/data] [--if-missing]

Pinned: transformers==4.40.2 tokenizers==0.19.1 sentencepiece==0.1.97 (Debian python3-sentencepiece).
"""
import argparse
import hashlib
import io
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one thread: the trainer's order stays fixed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_stamp  # noqa: E402
import tokenizer_reference as ref  # noqa: E402  (SOURCES and the tab-only reader)

ROBERTA_DIR = "roberta_tok"
XLMR_DIR = "xlmr_tok"
VOCAB_SIZE = 4000
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def training_text(data):
    """Every text (a and b) of the GLUE train.tsv files, in SOURCES order."""
    out = []
    for rel, header, col_a, col_b in ref.SOURCES:
        if not (rel.startswith("glue/") and rel.endswith("/train.tsv")):
            continue
        for _, a, b in ref.read_rows(os.path.join(data, rel), header, col_a, col_b):
            out.append(a)
            if b is not None:
                out.append(b)
    if not out:
        raise SystemExit(f"train_tokenizers: no GLUE train.tsv under {data}/glue; pass --data")
    return out


def train_bpe(texts, tmp):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    bpe = ByteLevelBPETokenizer()  # add_prefix_space=False, as RoBERTa
    bpe.train_from_iterator(texts, vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=SPECIALS,
                            show_progress=False)
    raw = os.path.join(tmp, "raw")
    os.makedirs(raw)
    bpe.save_model(raw)
    tok = RobertaTokenizerFast(vocab_file=os.path.join(raw, "vocab.json"),
                               merges_file=os.path.join(raw, "merges.txt"))
    tok.save_pretrained(tmp)
    shutil.rmtree(raw)


def train_spm(texts, tmp):
    import sentencepiece as spm
    from transformers import XLMRobertaTokenizer

    lines = [" ".join(t.split()) for t in texts]
    if hasattr(spm, "set_random_generator_seed"):
        spm.set_random_generator_seed(1234)
    model = io.BytesIO()  # in memory: no temporary path lands in the model's trainer_spec
    # XLM-R's layout inside the model: <unk>=0 <s>=1 </s>=2, no <pad> (HF adds the fairseq offset).
    spm.SentencePieceTrainer.train(sentence_iterator=iter([t for t in lines if t]), model_writer=model,
                                   model_type="unigram", vocab_size=VOCAB_SIZE, character_coverage=0.9995,
                                   num_threads=1, input_sentence_size=0, shuffle_input_sentence=False,
                                   unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
    path = os.path.join(tmp, "spm.model")
    with open(path, "wb") as f:
        f.write(model.getvalue())
    tok = XLMRobertaTokenizer(vocab_file=path)
    tok.save_pretrained(tmp)
    os.remove(path)


def stamp_of(data, name):
    """The input hash of one tokenizer folder (tools/fixture_stamp.py): the scripts, the GLUE train files, the
    vocabulary size and the pins."""
    inputs = [os.path.abspath(__file__), os.path.abspath(ref.__file__)]
    inputs += [os.path.join(data, rel) for rel, *_ in ref.SOURCES if rel.startswith("glue/") and rel.endswith("/train.tsv")]
    return fixture_stamp.input_hash(inputs, extra=[name, VOCAB_SIZE,
                                                   *fixture_stamp.versions("tokenizers", "transformers", "sentencepiece")])


def build(out, name, train, texts, digest):
    final = os.path.join(out, name)
    tmp = final + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    train(texts, tmp)
    fixture_stamp.write(tmp, digest)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)


def digest(folder):
    h = hashlib.sha256()
    for f in sorted(x for x in os.listdir(folder) if x != fixture_stamp.STAMP):
        with open(os.path.join(folder, f), "rb") as fh:
            h.update(f.encode() + b"\0" + fh.read())
    return h.hexdigest()[:16]


def main(argv=None):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder that receives roberta_tok/ and xlmr_tok/")
    p.add_argument("--data", default=os.path.join(root, "..", "shared", "data"))
    p.add_argument("--if-missing", action="store_true", help="skip a tokenizer whose folder was made from the same inputs (tools/fixture_stamp.py)")
    p.add_argument("--optional", action="store_true",
                   help="exit 0 without writing anything when tokenizers, transformers or sentencepiece is missing")
    args = p.parse_args(argv)
    try:
        import sentencepiece  # noqa: F401
        import tokenizers  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"train_tokenizers: {e}; run scripts/setup_python.sh", file=sys.stderr)
        return 0 if args.optional else 1

    jobs = [(ROBERTA_DIR, train_bpe), (XLMR_DIR, train_spm)]
    digests = {n: stamp_of(args.data, n) for n, _ in jobs}
    todo = [(n, t) for n, t in jobs
            if not (args.if_missing and fixture_stamp.is_current(os.path.join(args.out, n), digests[n]))]
    if todo:
        os.makedirs(args.out, exist_ok=True)
        texts = training_text(args.data)
        for name, train in todo:
            build(args.out, name, train, texts, digests[name])
    for name, _ in jobs:
        state = "trained" if any(n == name for n, _ in todo) else "exists"
        print(f"train_tokenizers: {os.path.join(args.out, name)} ({state}, {digest(os.path.join(args.out, name))})",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
