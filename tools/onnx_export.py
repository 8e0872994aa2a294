#!/usr/bin/env python3
"""Writes MODEL_DIR/model.onnx from a model folder headprune exported (slimmed or not), through the
reference Python's torch.onnx (transformers loads the folder, re-pruning from config.pruned_heads), checks
it in ONNX Runtime against headprune's own logits, and optionally times it.

Usage: onnx_export.py MODEL_DIR REFERENCE.h5 [--out FILE] [--tol 1e-4] [--result FILE.json] [--time OTHER_DIR] [--seq 64]
       onnx_export.py MODEL_DIR REFERENCE.h5 --int8 --logits-out FILE [--weight-max 63]
  REFERENCE.h5 holds input_ids, attention_mask, token_type_ids and headprune's `logits` for them.
  --sentence: MODEL_DIR is a sentence-transformers folder (#59): the graph is its whole module chain as
  SentenceTransformer(MODEL_DIR) runs it — the encoder, the Pooling module, Normalize when listed — with the
  output `sentence_embedding` [batch, width], checked against REFERENCE.h5's `embeddings` (headprune's).
  --result FILE.json: also write the check's outcome there ({"max_abs_diff", "tol", "examples"}), so that the
  caller can say why an export was refused.
  --time OTHER_DIR: also export OTHER_DIR (e.g. the unpruned model) to a temporary file and print the
  median ONNX Runtime latency of both at batch 1 and 32 (random ids, sequence --seq).
  --int8: MODEL_DIR/model.onnx (written before) rewritten into MODEL_DIR/model.int8.onnx with headprune's int8
  scheme in standard ONNX operators (weights s8 per output channel in ±--weight-max; activations u8 per row with
  a zero point, computed in the graph; MatMulInteger; the classifier float32), run on REFERENCE.h5's rows in
  length-sorted batches of 32 (each cut to its longest row), its logits written to --logits-out; headprune
  compares them with its own int8 at the same weight range (prune/export/onnx.cpp).
  --weight-max 63 (the default, 7 bits) keeps every u8·s8 pair sum within int16 (255·63·2 = 32130 <= 32767), so
  ONNX Runtime's AVX2 kernel (vpmaddubsw, which saturates its int16 pair sums) computes the exact product, as its
  VNNI kernel does: the file gives the same numbers on every CPU. 127 (8 bits) saturates on AVX2 CPUs without
  VNNI (ONNX Runtime issues #6004, #5849, #14642); tools/ort_avx2_model.py checks a file for it. The range is
  recorded in the graph's metadata_props (headprune.int8_weight_max).
Exit 0 when max |ONNX Runtime - headprune| <= tol, 1 otherwise; 77 when onnxruntime is not installed.
The graph has dynamic batch and sequence axes (inputs input_ids, attention_mask, token_type_ids; output
logits, a tagger's with the sequence axis too), opset 14.
"""
import argparse
import inspect
import json
import os
import re
import statistics
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no tools/__pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tools/, also when run by runpy.run_path
from hf_private import use_private_hf_home  # noqa: E402

use_private_hf_home()  # nothing left in ~/.cache/huggingface (a slimmed FFN loads through remote code)

import h5py
import numpy as np
import torch
import transformers
from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

try:
    import onnxruntime as ort
except ImportError:
    print("SKIP: onnxruntime is not installed (scripts/setup_python.sh installs it)")
    sys.exit(77)

NAMES = ["input_ids", "attention_mask", "token_type_ids"]


def needs_own_modeling(config: dict) -> bool:
    """Per-layer FFN widths (intermediate_sizes), removed hidden channels (classifier_hidden_size) or a layer with
    no heads left: headprune's modeling file beside the weights runs it. transformers' own attention reshapes a
    layer of 0 heads to [batch, seq, 0, head_dim], which torch.onnx's reshape divides by (SIGFPE)."""
    return ("intermediate_sizes" in config or "classifier_hidden_size" in config
            or 0 in config.get("heads_per_layer", []))


def is_tagger(config: dict) -> bool:
    """A token classifier's folder: config.json names a *ForTokenClassification."""
    return any(a.endswith("ForTokenClassification") for a in config.get("architectures") or [])


def load(model_dir: str):
    """A folder that needs_own_modeling loads through headprune's modeling file beside it; any other through
    transformers' own class of its model_type (a tagger's through AutoModelForTokenClassification)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    auto = AutoModelForTokenClassification if is_tagger(config) else AutoModelForSequenceClassification
    return auto.from_pretrained(model_dir, trust_remote_code=needs_own_modeling(config))


def input_names(model):
    """The inputs of NAMES the model takes, in its forward's order (DistilBERT has no token types)."""
    accepted = list(inspect.signature(model.forward).parameters)
    return sorted((n for n in NAMES if n in accepted), key=accepted.index)


def feed_of(sess, arrays):
    """The arrays the ONNX graph has inputs for."""
    return {i.name: arrays[i.name] for i in sess.get_inputs()}


class SentenceEmbedder(torch.nn.Module):
    """A SentenceTransformer's module chain (Transformer, Pooling, Normalize) as one module of tensors: the inputs
    the encoder takes in, `sentence_embedding` out, exactly as encode() computes it."""

    def __init__(self, st_model, names):
        super().__init__()
        self.st, self.names = st_model, names

    def forward(self, *tensors):
        features = dict(zip(self.names, tensors))
        for module in self.st:
            features = module(features)
        return features["sentence_embedding"]


def load_sentence(model_dir: str):
    """SentenceTransformer(model_dir), a slimmed encoder through the folder's remote code as load() takes it."""
    from sentence_transformers import SentenceTransformer
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    remote = needs_own_modeling(config)
    st_model = SentenceTransformer(model_dir, device="cpu", trust_remote_code=remote).eval()
    auto = st_model[0].auto_model
    auto.config.return_dict = False
    names = input_names(auto)
    return SentenceEmbedder(st_model, names), names


def export(model_dir: str, path: str, sentence: bool = False) -> None:
    if sentence:
        model, names = load_sentence(model_dir)
        output = "sentence_embedding"
    else:
        model = load(model_dir).eval()
        model.config.return_dict = False
        names, output = input_names(model), "logits"
    fill = {"input_ids": 5, "attention_mask": 1, "token_type_ids": 0}  # ids past RoBERTa's padding id; one type
    dummy = tuple(torch.full((2, 8), fill[n], dtype=torch.long) for n in names)
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    tagger = not sentence and is_tagger(model.config.to_dict())
    axes[output] = {0: "batch", 1: "sequence"} if tagger else {0: "batch"}
    with torch.no_grad():
        torch.onnx.export(model, dummy, path, input_names=names, output_names=[output], dynamic_axes=axes,
                          opset_version=14, do_constant_folding=True)


def session(path: str) -> "ort.InferenceSession":
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = os.cpu_count() or 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def latency_ms(sess, batch: int, seq: int, vocab: int, reps: int = 15) -> float:
    rng = np.random.default_rng(0)
    low = min(1000, vocab // 2)  # past the specials of a real vocabulary; half of a tiny test one
    feed = {"input_ids": rng.integers(low, vocab, size=(batch, seq), dtype=np.int64),
            "attention_mask": np.ones((batch, seq), dtype=np.int64),
            "token_type_ids": np.zeros((batch, seq), dtype=np.int64)}
    feed = feed_of(sess, feed)
    sess.run(None, feed)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        sess.run(None, feed)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


# The int8 export's weight range (hp::core::kPortableInt8WeightMax in core/kernels/lowp_gemm.h): 7 bits, so that
# no u8·s8 pair sum of ONNX Runtime's AVX2 kernel leaves int16.
PORTABLE_WEIGHT_MAX = 63
WEIGHT_MAX_KEY = "headprune.int8_weight_max"


def quantize_weight(w, weight_max):
    """headprune's weight scheme (core/kernels/quantize.h) in float32: w [K, N], one scale per column n,
    s = max|w| / weight_max, q = clamp(rne(w / s), -weight_max, weight_max)."""
    w = w.astype(np.float32)
    amax = np.abs(w).max(axis=0)
    scale = np.where(amax > 0, amax / np.float32(weight_max), np.float32(1)).astype(np.float32)
    q = np.clip(np.round(w / scale), -weight_max, weight_max).astype(np.int8)  # np.round: half to even, as std::nearbyint
    return q, scale, q.astype(np.int32).sum(axis=0).astype(np.int32)


def per_row_int8_linear(name, x, w, out, inits, weight_max):
    """Nodes computing out = x · w (w [K, N]) as headprune's int8 does: x quantised per row to u8 with its zero
    point, w per column to s8 in ±weight_max, MatMulInteger, then (C - z · colsum) · (s_row · s_col) in float32."""
    from onnx import helper, numpy_helper
    q, scale, colsum = quantize_weight(w, weight_max)
    p = name + "/int8/"
    for suffix, value in (("wq", q), ("ws", scale), ("colsum", colsum), ("zero", np.float32(0)),
                          ("one", np.float32(1)), ("u8max", np.float32(255))):
        inits.append(numpy_helper.from_array(np.asarray(value), p + suffix))
    n = helper.make_node
    return [
        n("ReduceMin", [x], [p + "min0"], axes=[-1], keepdims=1),
        n("ReduceMax", [x], [p + "max0"], axes=[-1], keepdims=1),
        n("Min", [p + "min0", p + "zero"], [p + "lo"]),
        n("Max", [p + "max0", p + "zero"], [p + "hi"]),
        n("Sub", [p + "hi", p + "lo"], [p + "range"]),
        n("Div", [p + "range", p + "u8max"], [p + "s0"]),
        n("Equal", [p + "s0", p + "zero"], [p + "flat"]),
        n("Where", [p + "flat", p + "one", p + "s0"], [p + "s"]),  # an all-zero row: scale 1
        n("Div", [p + "one", p + "s"], [p + "inv"]),
        n("Neg", [p + "lo"], [p + "neglo"]),
        n("Div", [p + "neglo", p + "s"], [p + "z0"]),
        n("Round", [p + "z0"], [p + "z1"]),
        n("Clip", [p + "z1", p + "zero", p + "u8max"], [p + "z"]),
        n("Mul", [x, p + "inv"], [p + "xs"]),
        n("Round", [p + "xs"], [p + "xr"]),
        n("Add", [p + "xr", p + "z"], [p + "xz"]),
        n("Clip", [p + "xz", p + "zero", p + "u8max"], [p + "xc"]),
        n("Cast", [p + "xc"], [p + "xq"], to=2),  # uint8
        n("MatMulInteger", [p + "xq", p + "wq"], [p + "c"]),
        n("Cast", [p + "z"], [p + "zi"], to=6),  # int32
        n("Mul", [p + "zi", p + "colsum"], [p + "zc"]),
        n("Sub", [p + "c", p + "zc"], [p + "c0"]),
        n("Cast", [p + "c0"], [p + "cf"], to=1),  # float
        n("Mul", [p + "s", p + "ws"], [p + "a"]),
        n("Mul", [p + "cf", p + "a"], [out]),
    ]


def quantize_per_row(fp32: str, int8: str, weight_max: int = PORTABLE_WEIGHT_MAX) -> int:
    """model.int8.onnx from model.onnx: every MatMul of the encoder and the pooler's Gemm with a constant weight
    becomes headprune's per-row int8 product with weights in ±weight_max (the classifier stays float32, as in
    headprune), and the range goes into the graph's metadata_props. Returns the count of linears."""
    import onnx
    from onnx import helper, numpy_helper
    m = onnx.load(fp32)
    inits = {i.name: i for i in m.graph.initializer}
    nodes, new_inits, count = [], [], 0
    for node in m.graph.node:
        weight = node.input[1] if len(node.input) > 1 else ""
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        # The output layer stays float32 (BERT's and DistilBERT's classifier, RoBERTa's and ELECTRA's out_proj).
        output_layer = re.search(r"(^|/)(classifier|out_proj)/(Gemm|MatMul)", node.name)
        if weight not in inits or output_layer or node.op_type not in ("MatMul", "Gemm"):
            nodes.append(node)
            continue
        w = numpy_helper.to_array(inits[weight])
        if w.ndim != 2 or w.size == 0:  # a layer with no neurons or heads left: nothing to quantise
            nodes.append(node)
            continue
        if node.op_type == "Gemm":
            if attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
                nodes.append(node)
                continue
            w = w.T if attrs.get("transB", 0) else w
            product = node.name + "/int8/product"
            nodes += per_row_int8_linear(node.name, node.input[0], w, product, new_inits, weight_max)
            nodes.append(helper.make_node("Add", [product, node.input[2]], [node.output[0]]) if len(node.input) > 2
                         else helper.make_node("Identity", [product], [node.output[0]]))
        else:
            nodes += per_row_int8_linear(node.name, node.input[0], w, node.output[0], new_inits, weight_max)
        count += 1
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    m.graph.initializer.extend(new_inits)
    used = {i for nd in m.graph.node for i in nd.input}
    kept = [i for i in m.graph.initializer if i.name in used]
    del m.graph.initializer[:]
    m.graph.initializer.extend(kept)
    for prop in [p for p in m.metadata_props if p.key == WEIGHT_MAX_KEY]:
        m.metadata_props.remove(prop)
    m.metadata_props.add(key=WEIGHT_MAX_KEY, value=str(weight_max))
    onnx.checker.check_model(m)
    onnx.save(m, int8)
    return count


def quantize_int8(model_dir: str, reference: str, logits_out: str, weight_max: int) -> int:
    fp32, int8 = os.path.join(model_dir, "model.onnx"), os.path.join(model_dir, "model.int8.onnx")
    linears = quantize_per_row(fp32, int8, weight_max)
    logits = run_rows(session(int8), reference)
    with h5py.File(logits_out, "w") as f:
        f["logits"] = logits
    print(f"onnx: wrote {int8} ({linears} linears int8: activations u8 per row, weights s8 in ±{weight_max} per output "
          f"channel); ran {len(logits)} examples")
    return 0


def run_rows(sess, inputs_h5: str):
    """The first output (logits [N, C], a tagger's [N, S, C] zero past each row's batch, or embeddings [N, D]) of every
    row of INPUTS.h5 (input_ids, attention_mask, token_type_ids, padded to S, in dataset order), run in length-sorted
    batches of 32, each cut to its longest row."""
    with h5py.File(inputs_h5, "r") as f:
        rows = {n: f[n][()].astype(np.int64) for n in NAMES}
    lengths = rows["attention_mask"].sum(1)
    order = np.argsort(lengths, kind="stable")
    logits = None
    for start in range(0, len(order), 32):
        idx = order[start:start + 32]
        S = max(1, int(lengths[idx].max()))
        out = sess.run(None, feed_of(sess, {n: np.ascontiguousarray(rows[n][idx, :S]) for n in NAMES}))[0]
        if logits is None:
            width = (rows["input_ids"].shape[1],) if out.ndim == 3 else ()
            logits = np.zeros((len(order), *width, *out.shape[1 + len(width):]), np.float32)
        if out.ndim == 3:
            logits[idx, :S] = out
        else:
            logits[idx] = out
    return logits


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("reference")
    ap.add_argument("--out")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--time")
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--int8", action="store_true")
    ap.add_argument("--logits-out")
    ap.add_argument("--weight-max", type=int, default=PORTABLE_WEIGHT_MAX,
                    help="the int8 weights' range ±N per output channel: 63 (7 bits, exact in ONNX Runtime on every "
                         "CPU) or 127")
    ap.add_argument("--result")
    ap.add_argument("--sentence", action="store_true")
    args = ap.parse_args()
    if args.int8:
        if not 1 <= args.weight_max <= 127:
            ap.error(f"--weight-max {args.weight_max}: use 1..127 (63: exact in ONNX Runtime's AVX2 kernel)")
        return quantize_int8(args.model_dir, args.reference, args.logits_out, args.weight_max)
    out = args.out or os.path.join(args.model_dir, "model.onnx")
    export(args.model_dir, out, args.sentence)
    sess = session(out)
    with h5py.File(args.reference, "r") as f:
        feed = {n: f[n][()].astype(np.int64) for n in NAMES}
        want = f["embeddings" if args.sentence else "logits"][()]
    got = sess.run(None, feed_of(sess, feed))[0]
    diff = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
    print(f"onnx: wrote {out}; max |ONNX Runtime - headprune| = {diff:.3g} over {want.shape[0]} examples (tol {args.tol})"
          + ("" if got.shape == want.shape else f": shape {got.shape} against headprune's {want.shape}"))
    if args.result:
        with open(args.result, "w") as f:
            json.dump({"max_abs_diff": diff, "tol": args.tol, "examples": int(want.shape[0])}, f)
    if args.time:
        vocab = transformers.AutoConfig.from_pretrained(args.model_dir).vocab_size
        with tempfile.TemporaryDirectory() as tmp:
            other = os.path.join(tmp, "other.onnx")
            export(args.time, other)
            base = session(other)
            for batch in (1, 32):
                a, b = latency_ms(base, batch, args.seq, vocab), latency_ms(sess, batch, args.seq, vocab)
                print(f"onnx latency batch {batch} seq {args.seq}: {args.time} {a:.1f} ms, {args.model_dir} {b:.1f} ms, "
                      f"speedup x{a / b:.2f}")
    return 0 if diff <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
