#!/usr/bin/env python3
"""`--target-heads N` for embeddings and the criteria scored on the embedding (#59, prune/embedding/embedding_run.h,
prune/heads/criteria.h), on a tiny sentence-transformers folder, against transformers and sentence-transformers.

`prune --config configs/sts_embed.yaml --target-heads 4` on the tiny folder (mean pooling, Normalize; 2 layers x 4
heads). Then, on the sentences the run says scored the heads (RUN_DIR/state/embedding/rank_sentences.txt), each
criterion whose target has an independent reference is recomputed with transformers' BertModel (eager attention,
its head_mask) and sentence-transformers' pooling and Normalize modules:
  taylor      mean over sentences of the L2 norm of d(embedding)/d(head mask), per layer L2-normalised;
  loo         1 - the mean cosine of the embeddings with the head masked to those without;
  confidence  the mean over real query tokens of each head's largest attention weight.
  attattr     integrated gradients (4 right Riemann steps) of the cosine of the embedding at alpha*A to the unscaled
              one, A each layer's attention probabilities put in place through the layer's (eval-mode) dropout slot.
lrp has no such reference (its rules linearise LayerNorm, GELU and attention): its importances must be finite and
differ between heads.
The curves: every criterion at every point, the unpruned point equal to the teacher's scores; the criterion chosen is
the one with the highest mean selection Spearman over its curve (random passed over); exactly 4 heads kept; the
export in SentenceTransformer embeds as `prune embed` does; `prune report` of the run shows the embedding's result, its
curves and the importances, and passes tests/report/browser_check.py in headless Chromium. Exit 77 (CTest: skipped) without sentence-transformers.

Usage: $VENV/bin/python tests/embed/heads_embedding.py --prune build/bin/prune --scratch DIR
"""
import csv
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no tests/embed/__pycache__ in the source tree
from st_common import REPO, check, check_export, prune_tiny, run, start  # noqa: E402

FLAGS = ["--target-heads", "4", "--set", "prune.search_examples=96", "--set", "prune.rank_examples=40",
         "--set", "prune.recover_steps=40", "--set", "prune.eval_split=dev[:200]", "--set", "prune.latency_batch=4",
         "--set", "prune.latency_seq=32", "--set", "prune.attattr_steps=4", "--set", "train.lr_peak=0.001"]


def reference(folder, sentences):
    """{criterion: [L][H]} of transformers + sentence-transformers on `sentences`, one sentence at a time."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertModel
    st = SentenceTransformer(folder, device="cpu")
    bert = BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    tok = st.tokenizer
    pool, norm = st[1], st[2]
    L, H = bert.config.num_hidden_layers, bert.config.num_attention_heads

    def embed(enc, mask):
        out = bert(**enc, head_mask=mask, output_attentions=True)
        f = pool({"token_embeddings": out.last_hidden_state, "attention_mask": enc["attention_mask"]})
        return norm(f)["sentence_embedding"][0], out.attentions

    taylor, loo, conf = torch.zeros(L, H, dtype=torch.float64), torch.zeros(L, H, dtype=torch.float64), \
        torch.zeros(L, H, dtype=torch.float64)
    tokens = 0
    for s in sentences:
        enc = tok([s], return_tensors="pt", truncation=True, max_length=st.max_seq_length)
        enc.pop("token_type_ids", None)
        mask = torch.ones(L, H, requires_grad=True)
        e, att = embed(enc, mask)
        jac = torch.stack([torch.autograd.grad(e[d], mask, retain_graph=True)[0] for d in range(e.numel())])
        taylor += jac.pow(2).sum(0).sqrt().double()
        with torch.no_grad():
            for l in range(L):
                conf[l] += att[l][0].max(-1).values.sum(-1).double()
                for h in range(H):
                    m = torch.ones(L, H)
                    m[l, h] = 0
                    e2, _ = embed(enc, m)
                    loo[l, h] += 1 - torch.nn.functional.cosine_similarity(e2, e, 0).double()
        tokens += enc["input_ids"].shape[1]
    n = len(sentences)
    attattr = attention_attribution(bert, tok, st, embed, sentences, steps=4)
    taylor /= n
    taylor = taylor / taylor.norm(dim=1, keepdim=True)  # prune.normalize_layers (default true)
    return {"taylor": taylor.tolist(), "loo": (loo / n).tolist(), "confidence": (conf / tokens).tolist(),
            "attattr": attattr.tolist()}


class Override(__import__("torch").nn.Module):
    """Stands in for a layer's attention dropout (the identity in eval mode): returns the probabilities it holds."""
    probs = None

    def forward(self, x):
        return self.probs


def attention_attribution(bert, tok, st, embed, sentences, steps):
    """Hao et al.'s importance with the embedding's target: per layer, the unscaled probabilities A replaced by α·A
    (α = k/steps) through the dropout slot, the gradient of the cosine to the unscaled embedding averaged over α,
    times A; the max over (query, key) of each head, the mean over sentences."""
    import torch
    L, H = bert.config.num_hidden_layers, bert.config.num_attention_heads
    total = torch.zeros(L, H, dtype=torch.float64)
    ones = torch.ones(L, H)
    for s in sentences:
        enc = tok([s], return_tensors="pt", truncation=True, max_length=st.max_seq_length)
        enc.pop("token_type_ids", None)
        with torch.no_grad():
            base, att = embed(enc, ones)
        for l in range(L):
            slot = bert.encoder.layer[l].attention.self
            keep, slot.dropout = slot.dropout, Override()
            grad = torch.zeros_like(att[l])
            for k in range(1, steps + 1):
                slot.dropout.probs = (att[l] * k / steps).requires_grad_(True)
                e, _ = embed(enc, ones)
                grad += torch.autograd.grad(torch.nn.functional.cosine_similarity(e, base, 0), slot.dropout.probs)[0]
            slot.dropout = keep
            total[l] += (att[l] * grad / steps)[0].flatten(1).max(-1).values.double()
    return total / len(sentences)


def close(a, b, rel=1e-3, abs_=1e-6):
    return all(abs(x - y) <= abs_ + rel * abs(y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


def report(args, out, s):
    """`prune report RUN_DIR`: the embedding's result, curves and importances in the page, and the page as a reader
    sees it in headless Chromium (tests/report/browser_check.py; that part skipped without Chromium)."""
    page = os.path.join(args.scratch, "report.html")
    run([args.prune, "report", out, "--out", page, "--max-seq-len", "64"])  # the attention views of the run's own
    # teacher, the tiny model of 64 positions
    html = open(page, encoding="utf-8").read()
    fin = s["final"]
    want = [
        "<h3>Exactly-N result</h3>",
        f"{fin['heads_kept']} of {s['heads_total']}",
        f"criterion ({fin['criterion']})",
        "%.4g" % fin["metrics"]["cosine_spearman"],
        'id="fig-curves"',
    ] + [f'id="fig-importance-{c}"' for c in ["confidence", "lrp", "taylor", "attattr", "random", "loo"]]
    missing = [w for w in want if w not in html]
    ok = check(not missing, f"prune report of the run shows the embedding's result, curves and importances "
                            f"(missing: {missing})")
    r = subprocess.run([sys.executable, os.path.join(REPO, "tests", "report", "browser_check.py"), page, "--shots",
                        os.path.join(args.scratch, "shots")], capture_output=True, text=True)
    if r.returncode == 77:
        print(f"skip the report in headless Chromium: {r.stdout.strip()[-200:]}")
        return ok
    return ok & check(r.returncode == 0, "the report in headless Chromium: " +
                      (r.stdout.strip().splitlines() or ["no output"])[-1])


def main():
    args, st, models = start()
    folder, _, s = prune_tiny(args, st, models, FLAGS)
    out = os.path.join(args.scratch, "run")
    ok = True
    fin = s["final"]
    ok &= check(s["objective"] == "embedding" and fin["heads_kept"] == 4, f"exactly 4 heads kept ({fin['mask']})")
    sentences = open(os.path.join(out, "state", "embedding", "rank_sentences.txt"), encoding="utf-8").read().split("\n")
    sentences = [x for x in sentences if x]
    ok &= check(len(sentences) == 40, f"{len(sentences)} ranking sentences (prune.rank_examples = 40)")
    ours = {c: json.load(open(os.path.join(out, "state", "importance", f"{c}_seed42_pruned0.json"), encoding="utf-8"))
            for c in ["confidence", "lrp", "taylor", "attattr", "random", "loo"]}
    ref = reference(folder, sentences)
    for c, want in ref.items():
        ok &= check(close(ours[c], want), f"{c}: headprune {ours[c]} = transformers {want}")
    flat = [x for row in ours["lrp"] for x in row]
    ok &= check(all(abs(x) < 1e30 for x in flat) and max(flat) - min(flat) > 1e-6, "lrp: finite, not constant")
    rows = list(csv.DictReader(open(os.path.join(out, "curves.csv"), encoding="utf-8")))
    crits = sorted({r["criterion"] for r in rows})
    ok &= check(len(rows) == 6 * 11 and len(crits) == 6, f"curves.csv: {len(rows)} points of {crits}")
    base = fin["reference"]["unpruned"]
    ok &= check(all(abs(100 * float(r["cosine_spearman"]) - base) < 1e-3 for r in rows if r["heads_pruned"] == "0"),
                f"every curve's unpruned point scores the teacher's {base:.4f}")
    means = {c: sum(float(r["select_cosine_spearman"]) for r in rows if r["criterion"] == c) / 11 for c in crits}
    best = max((c for c in crits if c != "random"), key=lambda c: means[c])
    ok &= check(fin["criterion"] == best, f"the criterion chosen ({fin['criterion']}) has the highest mean selection "
                                          f"Spearman over its curve ({best}: {means[best]:.3f})")
    ok &= check(set(s["criteria"]) == set(crits), "summary.json's criteria: each curve, as a task run's")
    ok &= check_export(args, st, folder, s)
    ok &= report(args, out, s)
    print("all checks passed" if ok else "some checks FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
