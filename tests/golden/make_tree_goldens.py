#!/usr/bin/env python3
"""Independent Python reference for attention attribution and the attribution tree
(Hao et al., AAAI 2021, "Self-Attention Attribution: Interpreting Information Interactions Inside
Transformer", sections 3 and 4.2).

Pinned versions (scripts/setup_python.sh installs exactly these):
  Debian 12 python3 3.11, python3-torch 1.13, python3-numpy 1.24, python3-h5py 3.7 (apt; imported by make_goldens);
  transformers==4.40.2 tokenizers==0.19.1 safetensors==0.8.0
Run from the repo root (a few seconds of one CPU core):
  $VENV/bin/python tests/golden/make_tree_goldens.py      # VENV=${HEADPRUNE_CACHE:-~/.cache/headprune}/venv

Writes
  tests/data/golden/tiny_bert_l4/        random BertForSequenceClassification, L=4 H=4 D=32 I=37, num_labels=3,
                                         tiny_bert's own vocab.txt; weights from make_goldens.randomize_ (seed 0)
                                         with the query and key weights and biases of every layer then multiplied
                                         by QK_SCALE = 2.125, so attention is peaked and the trees have edges
  tests/data/golden/explain/tree_tiny.json
Inputs: tests/data/golden/tiny_bert/vocab.txt, tests/data/analysis/tiny_pairs.tsv (first N_PAIRS rows, as
sentence pairs) and the SINGLES below.

What it computes, per example (one example per forward, no padding, eval mode, float64 forward on the stored
float32 weights):
  A_l      = layer l's attention probabilities [H, S, S] of the normal forward
  target   = argmax of the normal logits;  F(x) = softmax(logits(x))[target]
  Attr_l,h = A_l,h * (1/m) sum_{k=1..m} dF(alpha_k A_l)/dA_l,h,  alpha_k = k/m, m = 20 (right Riemann sum),
             where F(alpha A_l) runs the whole model with layer l's attention probabilities (all heads) replaced
             by alpha A_l; every other layer computes its attention normally.
  att[l]   = sum_h Attr_l,h  [S, S], query rows i, key columns j
and then the attribution tree of Hao et al.'s examples/attribution_tree.py (which hard-codes 12 layers),
generalised to L layers: see `attribution_tree` below.

This is an independent re-implementation: it never reads headprune's C++ code. The replacement of the
attention probabilities re-implements HF 4.40.2's eager BertSelfAttention.forward for one layer's module
instance; it is checked to reproduce the unpatched logits to 1e-10 when the override is A itself.
Output is byte-identical across runs (one thread, float64, fixed seed); floats are written with repr.
"""
import json
import os
import shutil
import sys
import types

sys.dont_write_bytecode = True  # importing make_goldens must leave no __pycache__ behind

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import tokenizers  # noqa: E402
from transformers import BertForSequenceClassification, BertTokenizer  # noqa: E402
from transformers.models.bert import modeling_bert  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_goldens  # noqa: E402  (tiny_config, randomize_, TINY_VOCAB, SEED)

REPO = os.path.dirname(os.path.dirname(HERE))
GOLDEN = os.path.join(REPO, "tests", "data", "golden")
VOCAB_SRC = os.path.join(GOLDEN, "tiny_bert", "vocab.txt")
MODEL_DIR = os.path.join(GOLDEN, "tiny_bert_l4")
OUT_JSON = os.path.join(GOLDEN, "explain", "tree_tiny.json")
PAIRS_TSV = os.path.join(REPO, "tests", "data", "analysis", "tiny_pairs.tsv")

L4, NUM_LABELS, MAX_LEN = 4, 3, 64
# Query and key weights and biases x QK_SCALE, so attention scores are ~QK_SCALE^2 larger and the maps
# peaked. Chosen by a scan of 2.0..7.0 in steps of 1/8: the trees are sparse and erratic in the scale; 2.125
# is one where every example below has edges in at least 2 of the layers the tree reads (0..L-2), the root
# wins by a clear margin and no normalised attribution lies within 3e-3 of the threshold.
QK_SCALE = 2.125
STEPS = 20          # m
THRESHOLD = 0.4
N_PAIRS = 4         # first rows of tiny_pairs.tsv
SINGLES = [  # picked among candidates for trees with edges in all three layers 0..2
    "this is a very funny film !",
    "he did not love the story .",
]

DEFINITION = (
    "Per example (no padding, eval, float64 on the stored float32 weights): A_l = layer l's attention probs "
    "[H,S,S] of the normal forward; target = argmax(logits); F = softmax(logits)[target]. "
    "Attr_l,h = A_l,h * (1/m) * sum_{k=1..m} dF(alpha_k*A_l)/dA_l,h with alpha_k = k/m (right Riemann sum), "
    "where F(alpha*A_l) runs the model with layer l's probs (all heads) replaced by alpha*A_l and every other "
    "layer normal. attribution[l][i][j] = sum_h Attr_l,h[i][j] (i = query, j = key). "
    "Tree (Hao et al. examples/attribution_tree.py generalised to L layers): "
    "P[l] = att[l] / |max(att[l][1:,:])|; P *= (P > threshold). "
    "C = sum_l att[l]; C /= |max(C)|; C *= (1 - I) * (C > 0); C[0,:] = 0; "
    "order = argsort(C.sum(-1)) descending (numpy quicksort, reversed); root = order[0] if order[0] != 0 else order[1]. "
    "height = [0]*S; fixed = [-1]*S (-1 absent, 0 present, 1 fixed); height[root] = (L-1)/L; fixed[root] = 0; "
    "for i != root in 0..S-1 with P[L-2][root][i] > threshold: fixed[i] = 0; fixed[root] = 1; "
    "edge (L-2, root, i, P[L-2][root][i]). "
    "For layer = L-3..0, i = 1..S-1, j = 0..S-1: skip if P[layer][i][j] < threshold or fixed[i] == -1; "
    "skip if fixed[j] == 1; skip if (i, j) is already an edge (any layer); skip if fixed[i] == 0 and fixed[j] == 0; "
    "skip if fixed[i] == 1 and fixed[j] == 0; if fixed[i] == 0 and fixed[j] == -1: fixed[i] = 1, fixed[j] = 0, "
    "height[j] = (height[i]*L - 1)/L; (then, re-testing) if fixed[i] == 1 and fixed[j] == -1: fixed[j] = 0, "
    "height[j] = min(height); edge (layer, i, j, P[layer][i][j]). "
    "Edges are listed in the order they are added. The root's direct children keep height 0 (as in the original)."
)


# ---------------------------------------------------------------- model

def make_model():
    """Writes tiny_bert_l4/ and returns the path. Weights: make_goldens.randomize_ then Q/K scaling."""
    os.makedirs(MODEL_DIR, exist_ok=True)
    with open(VOCAB_SRC, encoding="utf-8") as f:
        assert f.read() == "\n".join(make_goldens.TINY_VOCAB) + "\n", "tiny_bert/vocab.txt is not TINY_VOCAB"
    shutil.copyfile(VOCAB_SRC, os.path.join(MODEL_DIR, "vocab.txt"))
    tok = BertTokenizer(os.path.join(MODEL_DIR, "vocab.txt"), do_lower_case=True, model_max_length=MAX_LEN)
    tok.save_pretrained(MODEL_DIR)

    cfg = make_goldens.tiny_config(NUM_LABELS)
    cfg.num_hidden_layers = L4
    torch.manual_seed(make_goldens.SEED)
    model = BertForSequenceClassification(cfg)
    make_goldens.randomize_(model)
    with torch.no_grad():
        for layer in model.bert.encoder.layer:
            for lin in (layer.attention.self.query, layer.attention.self.key):
                lin.weight.mul_(QK_SCALE)
                lin.bias.mul_(QK_SCALE)
    model.eval()
    model.save_pretrained(MODEL_DIR, safe_serialization=True)
    return MODEL_DIR


def load(folder):
    model = BertForSequenceClassification.from_pretrained(folder, attn_implementation="eager")
    model.eval()
    model = model.double()
    for layer in model.bert.encoder.layer:
        assert type(layer.attention.self) is modeling_bert.BertSelfAttention, "need eager attention"
    return model, BertTokenizer.from_pretrained(folder)


# ---------------------------------------------------------------- probability replacement

def eager_self_attention_with_override(self, hidden_states, attention_mask=None, head_mask=None,
                                       encoder_hidden_states=None, encoder_attention_mask=None,
                                       past_key_value=None, output_attentions=False):
    """HF 4.40.2 eager BertSelfAttention.forward (encoder, absolute positions), except that the attention
    probabilities are replaced by self.override_probs when that is not None."""
    assert encoder_hidden_states is None and past_key_value is None and not self.is_decoder
    assert self.position_embedding_type == "absolute"
    B, S, _ = hidden_states.shape
    H, d = self.num_attention_heads, self.attention_head_size

    def heads(x):  # [B, S, H*d] -> [B, H, S, d]
        return x.view(B, S, H, d).permute(0, 2, 1, 3)

    q, k, v = heads(self.query(hidden_states)), heads(self.key(hidden_states)), heads(self.value(hidden_states))
    scores = torch.matmul(q, k.transpose(-1, -2)) / (d ** 0.5)
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = torch.softmax(scores, dim=-1)
    if self.override_probs is not None:
        probs = self.override_probs
    probs = self.dropout(probs)  # identity in eval mode
    if head_mask is not None:
        probs = probs * head_mask
    ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(B, S, H * d)
    return (ctx, probs) if output_attentions else (ctx,)


def patch_layer(model, layer):
    """Binds the override forward to one layer's self-attention instance; returns that module."""
    attn = model.bert.encoder.layer[layer].attention.self
    attn.override_probs = None
    attn.forward = types.MethodType(eager_self_attention_with_override, attn)
    return attn


def unpatch_layer(attn):
    del attn.forward  # back to the class's forward
    del attn.override_probs


def check_patch(model, enc):
    """Override = A itself (alpha = 1, no grad) must reproduce the normal logits to 1e-10 in every layer."""
    with torch.no_grad():
        out = model(**enc, output_attentions=True)
        worst = 0.0
        for l in range(model.config.num_hidden_layers):
            attn = patch_layer(model, l)
            attn.override_probs = out.attentions[l]
            diff = (model(**enc).logits - out.logits).abs().max().item()
            unpatch_layer(attn)
            assert diff < 1e-10, f"override with A changes the logits in layer {l}: {diff:g}"
            worst = max(worst, diff)
        again = (model(**enc).logits - out.logits).abs().max().item()
        assert again == 0.0, "unpatching did not restore the original forward"
    return worst


# ---------------------------------------------------------------- attribution

def attribution(model, enc, steps):
    """Returns (target, att [L, S, S] float64 numpy: Attr summed over heads)."""
    L = model.config.num_hidden_layers
    with torch.no_grad():
        out = model(**enc, output_attentions=True)
    target = int(torch.argmax(out.logits[0]).item())
    alphas = torch.arange(1, steps + 1, dtype=torch.float64) / steps  # k/m, k = 1..m
    batch = {k: v.expand(steps, -1) for k, v in enc.items()}           # m copies of the example
    att = []
    for l in range(L):
        A = out.attentions[l][0]                                       # [H, S, S]
        scaled = (alphas.view(-1, 1, 1, 1) * A).requires_grad_(True)   # [m, H, S, S]
        attn = patch_layer(model, l)
        attn.override_probs = scaled
        try:
            F = torch.softmax(model(**batch).logits, dim=-1)[:, target]  # [m]
            (grad,) = torch.autograd.grad(F.sum(), scaled)
        finally:
            unpatch_layer(attn)
        attr = A * grad.sum(0) / steps                                  # [H, S, S]
        att.append(attr.sum(0).detach().numpy())
    return target, np.stack(att)


# ---------------------------------------------------------------- tree (Hao et al. §4.2)

def attribution_tree(att, threshold):
    """att: [L, S, S] attribution summed over heads. Returns (root, edges, heights, root_margin).
    edges: [layer, i, j, score] in the order added. root_margin: gap between the deciding row sum and the
    next one (a tie would make the root depend on the sort)."""
    L, S, _ = att.shape
    prop = att.copy()
    # Layer L-1's rows 1: are exactly 0 (only [CLS] reaches the pooler): 0/0 = nan there, as in the original,
    # and the tree never reads layer L-1.
    with np.errstate(divide="ignore", invalid="ignore"):
        for l in range(L):
            prop[l] /= abs(prop[l][1:, :].max())
        prop *= (prop > threshold).astype(int)

    comb = att.sum(0)
    comb = comb / abs(comb.max())
    comb *= (1 - np.identity(S)) * (comb > 0)
    comb[0] *= 0
    sums = comb.sum(-1)
    order = np.argsort(sums)[::-1]
    k = 0 if order[0] != 0 else 1
    root = int(order[k])
    rest = [sums[t] for t in range(S) if t != root and t != 0]
    root_margin = float(sums[root] - max(rest)) if rest else float("inf")

    height = [0.0] * S
    fixed = [-1] * S
    edges, seen = [], set()
    height[root] = (L - 1) / L
    fixed[root] = 0
    for i in range(S):
        if i != root and prop[L - 2][root][i] > threshold:
            fixed[i] = 0
            fixed[root] = 1
            edges.append([L - 2, root, i, float(prop[L - 2][root][i])])
            seen.add((root, i))
    for layer in range(L - 3, -1, -1):
        for i in range(1, S):
            for j in range(S):
                if prop[layer][i][j] < threshold or fixed[i] == -1:
                    continue
                if fixed[j] == 1:
                    continue
                if (i, j) in seen:
                    continue
                if fixed[i] == 0 and fixed[j] == 0:
                    continue
                if fixed[i] == 1 and fixed[j] == 0:
                    continue
                if fixed[i] == 0 and fixed[j] == -1:
                    fixed[i] = 1
                    fixed[j] = 0
                    height[j] = (height[i] * L - 1) / L
                if fixed[i] == 1 and fixed[j] == -1:
                    fixed[j] = 0
                    height[j] = min(height)
                edges.append([layer, i, j, float(prop[layer][i][j])])
                seen.add((i, j))
    return root, edges, height, root_margin


def threshold_margin(att, threshold):
    """Smallest |P - threshold| over layers 0..L-2 (the ones the tree reads), before masking: how close the
    nearest threshold decision was."""
    prop = att[:-1].copy()
    for l in range(prop.shape[0]):
        prop[l] /= abs(prop[l][1:, :].max())
    return float(np.abs(prop - threshold).min())


# ---------------------------------------------------------------- main

def read_pairs(path, n):
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        assert header == ["sentence1", "sentence2", "label"], header
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return [(r[0], r[1]) for r in rows[:n]]


def main():
    torch.set_num_threads(1)
    torch.manual_seed(make_goldens.SEED)
    transformers.logging.set_verbosity_error()
    folder = make_model()
    model, tok = load(folder)
    texts = read_pairs(PAIRS_TSV, N_PAIRS) + [(s, "") for s in SINGLES]

    examples = []
    for n, (a, b) in enumerate(texts):
        e = tok(a, b if b else None, truncation=False, max_length=MAX_LEN, padding=False)
        assert len(e["input_ids"]) <= MAX_LEN
        assert all(i != tok.unk_token_id for i in e["input_ids"]), f"[UNK] in {a!r} / {b!r}"
        enc = {"input_ids": torch.tensor([e["input_ids"]]),
               "token_type_ids": torch.tensor([e["token_type_ids"]]),
               "attention_mask": torch.ones(1, len(e["input_ids"]), dtype=torch.long)}
        if n == 0:
            worst = check_patch(model, enc)
            print(f"patch check: override = A reproduces the logits in all {L4} layers (max diff {worst:.1e})")
        target, att = attribution(model, enc, STEPS)
        root, edges, heights, root_margin = attribution_tree(att, THRESHOLD)
        tokens = tok.convert_ids_to_tokens(e["input_ids"])
        per_layer = [sum(1 for ed in edges if ed[0] == l) for l in range(L4)]
        margin = threshold_margin(att, THRESHOLD)
        print(f"[{n}] S={len(tokens)} target={target} root={root} ({tokens[root]}) edges per layer {per_layer} "
              f"root margin {root_margin:.3g} threshold margin {margin:.3g}")
        print("     " + " ".join(f"{t}{i}" for i, t in enumerate(tokens)))
        print("     edges " + ", ".join(f"L{l}:{tokens[i]}{i}->{tokens[j]}{j}" for l, i, j, _ in edges))
        assert sum(1 for c in per_layer if c > 0) >= 2, f"example {n}: edges in fewer than 2 layers"
        assert root_margin > 1e-2, f"example {n}: the root is decided by a near tie ({root_margin:g})"
        assert margin > 1e-3, f"example {n}: an attribution lies within {margin:g} of the threshold"
        examples.append({
            "text_a": a, "text_b": b,
            "input_ids": e["input_ids"], "token_type_ids": e["token_type_ids"], "tokens": tokens,
            "target": target,
            "attribution": att.tolist(),
            "root": root, "edges": edges, "heights": heights,
        })

    doc = {
        "generator": "tests/golden/make_tree_goldens.py",
        "versions": f"torch={torch.__version__} transformers={transformers.__version__} "
                    f"tokenizers={tokenizers.__version__} numpy={np.__version__}",
        "model": os.path.relpath(folder, REPO),
        "steps": STEPS,
        "threshold": THRESHOLD,
        "definition": DEFINITION,
        "examples": examples,
    }
    os.makedirs(os.path.dirname(OUT_JSON), exist_ok=True)
    with open(OUT_JSON + ".tmp", "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.replace(OUT_JSON + ".tmp", OUT_JSON)
    for p in sorted(os.listdir(folder)):
        print(f"  {os.path.relpath(os.path.join(folder, p), REPO)}: {os.path.getsize(os.path.join(folder, p))} bytes")
    print(f"  {os.path.relpath(OUT_JSON, REPO)}: {os.path.getsize(OUT_JSON)} bytes")
    total = sum(os.path.getsize(os.path.join(folder, p)) for p in os.listdir(folder))
    assert total < 200 * 1024, f"{folder} is {total} bytes (limit 200 KB)"


if __name__ == "__main__":
    main()
