#!/usr/bin/env python3
"""Small random-initialised encoders of every architecture headprune loads besides BERT, made by transformers
itself, and the reference outputs the C++ tests compare with (issue #28).

Usage: make_arch_models.py --out DIR [--tokenizers TOKDIR] [--data ../shared/data] [--if-missing]
Run with the reference venv (scripts/setup_python.sh: transformers 4.40.2, tokenizers 0.19.1, sentencepiece).

For each of roberta, xlm-roberta, distilbert and electra, DIR/<model_type>/ holds
  - the model, `save_pretrained` of its real *ForSequenceClassification class and config class (3 labels, as
    MNLI; seed 0; 3 layers × 4 heads, hidden 32, FFN 37, ELECTRA's embeddings 16 wide and projected, DistilBERT's
    positions sinusoidal), every weight, LayerNorms included, moved off its init so that no two tensors are
    interchangeable (swapped LayerNorms or an unprojected embedding change the logits);
  - its tokenizer: RoBERTa a byte-level BPE and XLM-R a SentencePiece model, both trained on GLUE text by
    tools/train_tokenizers.py into TOKDIR (default DIR; the tests share the tokenizer fixture's folder); DistilBERT and ELECTRA the bert-base-uncased WordPiece vocabulary of ../shared/vocab;
  - reference.h5: GLUE rows (SST-2 singles, RTE pairs) encoded by the HF tokenizer (input_ids, attention_mask,
    token_type_ids), and the HF logits computed in float64 on the saved float32 weights: `logits`; with a head
    mask (`head_mask` [L, H], HF's head_mask argument): `logits_head_mask`; after HF's prune_heads of the heads
    in the `pruned` attribute (JSON {layer: [heads]}): `logits_pruned`.
Every model folder is written once: --if-missing keeps the ones made from the same inputs (tools/fixture_stamp.py).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import torch
import transformers
from transformers import (AutoTokenizer, DistilBertConfig, DistilBertForSequenceClassification, DistilBertTokenizerFast,
                          ElectraConfig, ElectraForSequenceClassification, ElectraTokenizerFast, RobertaConfig,
                          RobertaForSequenceClassification, XLMRobertaConfig, XLMRobertaForSequenceClassification)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fixture_stamp  # noqa: E402
REPO = os.path.dirname(HERE)
LAYERS, HEADS, HIDDEN, FFN, LABELS, MAX_LEN = 3, 4, 32, 37, 3, 64
HEAD_MASK = [[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 1, 0]]
PRUNED = {0: [1], 1: [0, 3], 2: [3]}


def read_rows(data, n_single=10, n_pair=10):
    """SST-2 dev sentences and RTE dev pairs (tab-split, no CSV quoting)."""
    rows = []
    with open(os.path.join(data, "glue", "SST-2", "dev.tsv"), encoding="utf-8") as f:
        next(f)
        rows += [(line.rstrip("\n").split("\t")[0], None) for _, line in zip(range(n_single), f)]
    with open(os.path.join(data, "glue", "RTE", "dev.tsv"), encoding="utf-8") as f:
        head = next(f).rstrip("\n").split("\t")
        a, b = head.index("sentence1"), head.index("sentence2")
        for _, line in zip(range(n_pair), f):
            cols = line.rstrip("\n").split("\t")
            rows.append((cols[a], cols[b]))
    return rows


def perturb(model, seed, keep=()):
    """Moves every weight off its init by N(0, 0.1) (seeded), except the named ones."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name not in keep:
                p.add_(torch.randn(p.shape, generator=gen) * 0.1)


def common(vocab_size, pad):
    return dict(vocab_size=vocab_size, num_labels=LABELS, pad_token_id=pad, initializer_range=0.1)


def make_roberta(cls_cfg, cls_model, tok_dir):
    tok = AutoTokenizer.from_pretrained(tok_dir)
    cfg = cls_cfg(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=FFN,
                  max_position_embeddings=MAX_LEN + 2, type_vocab_size=1, bos_token_id=tok.bos_token_id,
                  eos_token_id=tok.eos_token_id, **common(len(tok), tok.pad_token_id))
    return cls_model(cfg), tok, []


def make_distilbert(vocab):
    tok = DistilBertTokenizerFast(vocab_file=vocab)
    cfg = DistilBertConfig(dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS, hidden_dim=FFN, max_position_embeddings=MAX_LEN,
                           sinusoidal_pos_embds=True, **common(len(tok), tok.pad_token_id))
    return DistilBertForSequenceClassification(cfg), tok, ["distilbert.embeddings.position_embeddings.weight"]


def make_electra(vocab):
    tok = ElectraTokenizerFast(vocab_file=vocab)
    cfg = ElectraConfig(embedding_size=16, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                        intermediate_size=FFN, max_position_embeddings=MAX_LEN, **common(len(tok), tok.pad_token_id))
    return ElectraForSequenceClassification(cfg), tok, []


def logits(model, enc, **kw):
    with torch.no_grad():
        return model.double()(**enc, **kw).logits.float().numpy()


def write_reference(folder, model_type, rows):
    tok = AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder, attn_implementation="eager").eval()
    # Singles and pairs in one batch: encode each, then pad to the longest.
    encs = [tok(a, b, truncation=True, max_length=MAX_LEN) for a, b in rows]
    width = max(len(e["input_ids"]) for e in encs)
    ids = np.full((len(rows), width), tok.pad_token_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    types = np.zeros((len(rows), width), dtype=np.int64)
    for i, e in enumerate(encs):
        n = len(e["input_ids"])
        ids[i, :n], mask[i, :n] = e["input_ids"], 1
        if "token_type_ids" in e:
            types[i, :n] = e["token_type_ids"]
    enc = {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}
    if model_type not in ("distilbert",):
        enc["token_type_ids"] = torch.tensor(types)
    out = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "logits": logits(model, enc),
           "head_mask": np.array(HEAD_MASK, dtype=np.float32)}
    out["logits_head_mask"] = logits(model, enc, head_mask=torch.tensor(HEAD_MASK, dtype=torch.float64))
    model.prune_heads(PRUNED)
    out["logits_pruned"] = logits(model, enc)
    with h5py.File(os.path.join(folder, "reference.h5.tmp"), "w") as f:
        for k, v in out.items():
            f.create_dataset(k, data=v)
        f.attrs["pruned"] = json.dumps(PRUNED)
        f.attrs["transformers"] = transformers.__version__
    os.replace(os.path.join(folder, "reference.h5.tmp"), os.path.join(folder, "reference.h5"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data"))
    ap.add_argument("--vocab", default=os.path.join(REPO, "..", "shared", "vocab", "vocab.txt"))
    ap.add_argument("--tokenizers", help="where the trained tokenizers are (made there when missing); default --out")
    ap.add_argument("--if-missing", action="store_true")
    args = ap.parse_args()
    tokenizers = args.tokenizers or args.out
    subprocess.run([sys.executable, os.path.join(HERE, "train_tokenizers.py"), "--out", tokenizers, "--data", args.data,
                    "--if-missing"], check=True)
    rows = read_rows(args.data)
    makers = {
        "roberta": lambda: make_roberta(RobertaConfig, RobertaForSequenceClassification,
                                        os.path.join(tokenizers, "roberta_tok")),
        "xlm-roberta": lambda: make_roberta(XLMRobertaConfig, XLMRobertaForSequenceClassification,
                                            os.path.join(tokenizers, "xlmr_tok")),
        "distilbert": lambda: make_distilbert(args.vocab),
        "electra": lambda: make_electra(args.vocab),
    }
    tokenizer_of = {"roberta": os.path.join(tokenizers, "roberta_tok"),
                    "xlm-roberta": os.path.join(tokenizers, "xlmr_tok")}
    for seed, (model_type, make) in enumerate(makers.items()):
        folder = os.path.join(args.out, model_type)
        # The input hash (tools/fixture_stamp.py): this script, the tokenizer or vocabulary, the rows, the pins.
        digest = fixture_stamp.input_hash(
            [os.path.abspath(__file__), tokenizer_of.get(model_type, args.vocab),
             os.path.join(args.data, "glue", "SST-2", "dev.tsv"), os.path.join(args.data, "glue", "RTE", "dev.tsv")],
            extra=[model_type, seed, transformers.__version__, torch.__version__])
        if args.if_missing and fixture_stamp.is_current(folder, digest):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        torch.manual_seed(seed)
        model, tok, keep = make()
        perturb(model, seed, keep)
        model.save_pretrained(folder, safe_serialization=True)
        tok.save_pretrained(folder)
        write_reference(folder, model_type, rows)
        fixture_stamp.write(folder, digest)  # last: the folder is complete
        print(f"make_arch_models: {folder}: {type(model).__name__}, vocab {len(tok)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
