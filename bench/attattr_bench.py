#!/usr/bin/env python3
"""Python baseline for attention-attribution head importance (Hao et al. 2021, "Self-Attention Attribution").

The per-example, per-layer integrated-gradients loop of the paper's reference code, on HF transformers
4.40.2 (eager attention) + Debian's torch 1.13, as the reference our C++ attribution is timed against.
For each of the first --examples SST-2 examples of --split (default dev: Hao's script takes the first dev
examples), as a batch of 1 truncated to --max-seq-len and, as in Hao's `prune_head_with_attr.py`,
zero-padded to --max-seq-len = 128 with an attention mask (--no-pad runs each example at its own length,
as our C++ does), and for each layer l:
  - one forward gives layer l's attention probabilities A [1, H, S, S];
  - m = --steps scaled copies alpha_k * A, alpha_k = k/m, k = 1..m (right Riemann sum), go through a full
    forward from the embeddings (no reuse of lower layers, as in Hao's code) with layer l's attention
    probabilities REPLACED by the copies (batches of --chunk copies);
  - F = softmax probability of the gold label; attribution = A * sum_k dF/d(alpha_k A) / m;
  - importance[l, h] += max over real-token (i, j) of attribution[h, i, j] (Hao's code cuts the padding off
    before the max); finally averaged over the examples.
The replacement is done by monkey-patching BertSelfAttention.forward with a re-implementation of the
eager computation that uses a module's `probs_override` tensor when set; it is checked to reproduce the
unpatched logits exactly (max abs diff < 1e-5) on one example before timing.
Tokenisation, model loading and the checks happen before the timer.

Usage: $VENV/bin/python bench/attattr_bench.py [--examples 32] [--split dev] [--steps 20] [--chunk 20]
           [--threads 2] [--max-seq-len 128] [--no-pad] [--model runs/sst2/finetune/best] [--data-root ../shared/data] [--out FILE.json]
           [--check-completeness]   (IG completeness on example 0 / layer 0; use e.g. --steps 50)
"""
import argparse
import json
import math
import os
import time

os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")  # Debian's OpenBLAS mis-detects this CPU otherwise

import torch  # noqa: E402
from transformers import BertForSequenceClassification, BertTokenizerFast  # noqa: E402
from transformers.models.bert import modeling_bert  # noqa: E402


def self_attention_forward(self, hidden_states, attention_mask=None, head_mask=None, encoder_hidden_states=None,
                           encoder_attention_mask=None, past_key_value=None, output_attentions=False):
    """Eager BertSelfAttention.forward of transformers 4.40.2 (encoder self-attention, absolute positions
    only), except that the attention probabilities are replaced by self.probs_override when it is set."""
    assert encoder_hidden_states is None and past_key_value is None and not self.is_decoder
    assert self.position_embedding_type == "absolute"
    query = self.transpose_for_scores(self.query(hidden_states))  # [B, H, S, d]
    key = self.transpose_for_scores(self.key(hidden_states))
    value = self.transpose_for_scores(self.value(hidden_states))
    scores = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(self.attention_head_size)
    if attention_mask is not None:
        scores = scores + attention_mask  # extended additive mask, precomputed by BertModel
    probs = torch.nn.functional.softmax(scores, dim=-1)
    override = getattr(self, "probs_override", None)
    if override is not None:  # Hao's code also computes the scores, then swaps in the given tensor
        probs = override
    probs = self.dropout(probs)  # identity in eval mode
    if head_mask is not None:
        probs = probs * head_mask
    context = torch.matmul(probs, value).permute(0, 2, 1, 3).contiguous()
    context = context.view(context.size()[:-2] + (self.all_head_size,))
    return (context, probs) if output_attentions else (context,)


def read_tsv(path, limit):
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:limit + 1]
    return [r[0] for r in rows], [int(r[1]) for r in rows]


def expand(enc, n):
    """The single example repeated n times (Hao's code feeds the m copies as one batch)."""
    return {k: v.expand(n, -1) for k, v in enc.items()}


def gold_prob(model, enc, gold):
    return torch.softmax(model(**enc).logits, dim=-1)[:, gold]


def attribute_layer(model, enc, gold, layer, steps, chunk):
    """Returns (A [H,S,S], attribution [H,S,S]) of one example for one layer."""
    attn = model.bert.encoder.layer[layer].attention.self
    with torch.no_grad():  # layer l's attention probabilities of the unmodified forward
        A = model(**enc, output_attentions=True).attentions[layer]  # [1, H, S, S]
    grad_sum = torch.zeros_like(A[0])
    for k0 in range(1, steps + 1, chunk):
        alphas = torch.arange(k0, min(k0 + chunk, steps + 1), dtype=A.dtype) / steps  # k/m, k = 1..m
        scaled = (alphas.view(-1, 1, 1, 1) * A).requires_grad_(True)  # [n, H, S, S]
        attn.probs_override = scaled
        try:
            F = gold_prob(model, expand(enc, alphas.numel()), gold)  # [n], full forward from embeddings
            (grad,) = torch.autograd.grad(F.sum(), scaled)
        finally:
            attn.probs_override = None
        grad_sum += grad.sum(0)
    return A[0], A[0] * grad_sum / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--examples", type=int, default=32)
    ap.add_argument("--split", default="dev", help="SST-2 split whose first --examples rows are used")
    ap.add_argument("--steps", type=int, default=20, help="m, Riemann steps of the integrated gradients")
    ap.add_argument("--chunk", type=int, default=20, help="scaled copies per forward/backward batch")
    ap.add_argument("--max-seq-len", type=int, default=128, help="truncation length (Hao's default: 128)")
    ap.add_argument("--no-pad", action="store_true",
                    help="run each example at its own length instead of padding it to --max-seq-len as Hao's code does")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default="runs/sst2/finetune/best")
    ap.add_argument("--data-root", default="../shared/data")
    ap.add_argument("--out", default=None, help="write timing and importance as JSON")
    ap.add_argument("--check-completeness", action="store_true",
                    help="print sum(attribution) vs F(A) - F(0) for example 0, layer 0")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(42)

    tok = BertTokenizerFast.from_pretrained(args.model)
    model = BertForSequenceClassification.from_pretrained(args.model, attn_implementation="eager")
    model.eval()
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    sents, labels = read_tsv(os.path.join(args.data_root, "glue", "SST-2", args.split + ".tsv"), args.examples)
    padding = False if args.no_pad else "max_length"
    encs = [tok(s, truncation=True, max_length=args.max_seq_len, padding=padding, return_tensors="pt")
            for s in sents]

    # Check the patch: unpatched logits vs patched with each layer's own probabilities as the override.
    with torch.no_grad():
        ref = model(**encs[0]).logits
        modeling_bert.BertSelfAttention.forward = self_attention_forward
        own = model(**encs[0], output_attentions=True)
        assert (own.logits - ref).abs().max().item() < 1e-5, "patched forward differs from eager"
        for l in range(L):
            attn = model.bert.encoder.layer[l].attention.self
            assert type(attn) is modeling_bert.BertSelfAttention, "load the model with eager attention"
            attn.probs_override = own.attentions[l]
            diff = (model(**encs[0]).logits - ref).abs().max().item()
            attn.probs_override = None
            assert diff < 1e-5, f"override with own probs changes logits (layer {l}: {diff:g})"
    print(f"patch check: logits with own probs as override match the unpatched model (< 1e-5), {L} layers")

    if args.check_completeness:  # integrated gradients: sum of attributions ~ F(A) - F(0 * A)
        A, attr = attribute_layer(model, encs[0], labels[0], 0, args.steps, args.chunk)
        attn = model.bert.encoder.layer[0].attention.self
        with torch.no_grad():
            f_a = gold_prob(model, encs[0], labels[0]).item()
            attn.probs_override = torch.zeros_like(A).unsqueeze(0)
            f_0 = gold_prob(model, encs[0], labels[0]).item()
            attn.probs_override = None
        print(f"completeness (example 0, layer 0, m={args.steps}): sum(attribution) = {attr.sum().item():.6f}, "
              f"F(A) - F(0) = {f_a - f_0:.6f} (F(A) = {f_a:.6f}, F(0) = {f_0:.6f})")

    # Timed loop: per example, per layer.
    importance = torch.zeros(L, H)
    t0 = time.perf_counter()
    for enc, gold in zip(encs, labels):
        for l in range(L):
            _, attr = attribute_layer(model, enc, gold, l, args.steps, args.chunk)
            n_real = int(enc["attention_mask"][0].sum())
            importance[l] += attr[:, :n_real, :n_real].amax(dim=(1, 2))  # max over real (i, j) per head
    seconds = time.perf_counter() - t0
    importance /= len(encs)

    n = len(encs)
    tokens = sum(int(e["attention_mask"][0].sum()) for e in encs)
    shape = "each at its own length" if args.no_pad else f"padded to {args.max_seq_len}"
    print(f"attattr: {n} examples ({tokens / n:.1f} real tokens on average, {shape}) x {L} layers x "
          f"{args.steps} steps: {seconds:.2f} s ({seconds / n:.3f} s/example)")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"seconds": seconds, "examples": n, "steps": args.steps, "padded": not args.no_pad,
                       "importance": importance.tolist()},
                      f, indent=1)


if __name__ == "__main__":
    main()
