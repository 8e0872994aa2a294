#!/usr/bin/env python3
"""A numpy model of ONNX Runtime's AVX2 u8·s8 MatMulInteger, and a check of an int8 ONNX file against it.

ONNX Runtime (MLAS) multiplies uint8 activations by int8 weights on CPUs with AVX2 but without VNNI with
vpmaddubsw: for each row m, column n and each adjacent pair of the reduction axis (k, k+1), k even (MLAS packs
K in groups of 4, zero-padded), it adds the two products a[m,k]·b[k,n] + a[m,k+1]·b[k+1,n] into an int16 WITH
SATURATION to [-32768, 32767]; vpmaddwd and vpaddd then add those pair sums in int32 (exactly). With VNNI
(vpdpbusd) every product is added in int32 and the result is the exact product. ONNX Runtime issues #6004,
#5849 and #14642 are this saturation; its instruction set cannot be capped from outside, hence this model.

Worst case over all uint8 inputs (a in [0, 255]), for the pair (k, k+1) of column n:
    largest pair sum  = 255 · (max(b[k,n], 0) + max(b[k+1,n], 0))
    smallest pair sum = 255 · (min(b[k,n], 0) + min(b[k+1,n], 0))
so weights in ±63 give at most 255·63·2 = 32130 <= 32767 (never saturates), and weights in ±127 up to
255·127·2 = 64770 (saturates wherever two neighbours share a sign and are large, and the activations are too).

    ort_avx2_model.py MODEL.int8.onnx [--inputs REF.h5 | --texts FILE] [--examples 32] [--json OUT.json]
    ort_avx2_model.py --probe        # which kernel ONNX Runtime runs on this CPU (the model or exact)

The check, for every MatMulInteger whose B is a weight initializer:
  (a) the worst-case pair sum above fits int16, for every pair and column;
  (b) on real activations (the graph run in ONNX Runtime with each MatMulInteger's uint8 input added as a graph
      output; examples from --inputs, an HDF5 file with input_ids, attention_mask, token_type_ids, or --texts,
      one example per line tokenised with the model folder's tokenizer, or else random ids), the AVX2 model's
      product equals the exact int32 product. It also reports which of the two ONNX Runtime's own output equals
      on this CPU.
Exit 0 when both hold, 1 when either fails, 77 when onnxruntime is not installed.
"""
import argparse
import json
import os
import sys

import numpy as np

try:
    import onnx
    import onnxruntime as ort
    from onnx import helper, numpy_helper, TensorProto
except ImportError:
    print("SKIP: onnxruntime or onnx is not installed (scripts/setup_python.sh installs them)")
    sys.exit(77)

INT16_MIN, INT16_MAX = -32768, 32767
U8_MAX = 255


def pairs(b):
    """b [K, N] int as its even and odd rows [ceil(K/2), N] (K padded with a zero row, as MLAS pads)."""
    b = np.asarray(b, dtype=np.int32)
    if b.shape[0] % 2:
        b = np.concatenate([b, np.zeros((1, b.shape[1]), np.int32)])
    return b[0::2], b[1::2]


def worst_pair_sums(b):
    """The largest and smallest pair sum over all uint8 inputs, per pair and column: ([P, N], [P, N])."""
    even, odd = pairs(b)
    hi = U8_MAX * (np.maximum(even, 0) + np.maximum(odd, 0))
    lo = U8_MAX * (np.minimum(even, 0) + np.minimum(odd, 0))
    return hi, lo


def weight_report(weights):
    """Check (a) over weight matrices b [K, N] (int8): the largest |pair sum| over all uint8 inputs on either side
    (a sum below -32768 saturates as one above 32767 does), and how many pairs and columns can saturate."""
    worst, can_saturate, max_abs_w = 0, 0, 0
    for b in weights:
        hi, lo = worst_pair_sums(b)
        worst = max(worst, int(hi.max(initial=0)), int(-lo.min(initial=0)))
        can_saturate += int(np.count_nonzero(hi > INT16_MAX) + np.count_nonzero(lo < INT16_MIN))
        max_abs_w = max(max_abs_w, int(np.abs(np.asarray(b, np.int32)).max(initial=0)))
    return {"max_abs_weight": max_abs_w, "worst_pair_sum": worst, "pairs_that_can_saturate": can_saturate,
            "fits_int16": can_saturate == 0}


def avx2_matmul(a, b, rows_per_chunk=16):
    """ONNX Runtime's AVX2 u8·s8 product: a [M, K] uint8, b [K, N] int8 -> int32 [M, N], each pair sum
    clamped to int16 before the int32 sum. Also returns the count of pair sums that were clamped."""
    a = np.asarray(a, dtype=np.int32)
    if a.shape[1] % 2:
        a = np.concatenate([a, np.zeros((a.shape[0], 1), np.int32)], axis=1)
    a_even, a_odd = a[:, 0::2], a[:, 1::2]
    b_even, b_odd = pairs(b)
    out = np.zeros((a.shape[0], b_even.shape[1]), np.int64)
    clamped = 0
    for start in range(0, a.shape[0], rows_per_chunk):
        s = (a_even[start:start + rows_per_chunk, :, None] * b_even[None] +
             a_odd[start:start + rows_per_chunk, :, None] * b_odd[None])  # [m, P, N] int32: exact pair sums
        c = np.clip(s, INT16_MIN, INT16_MAX)
        clamped += int(np.count_nonzero(c != s))
        out[start:start + rows_per_chunk] = c.sum(axis=1, dtype=np.int64)
    return out.astype(np.int32), clamped


def exact_matmul(a, b):
    """The exact product in int64 (what VNNI's vpdpbusd gives)."""
    return np.asarray(a, dtype=np.int64) @ np.asarray(b, dtype=np.int64)


def weight_products(model):
    """[(node name, A input, C output, B as int8 [K, N])] of every MatMulInteger with an initializer B and no
    zero points (or zero ones)."""
    inits = {i.name: i for i in model.graph.initializer}
    found = []
    for node in model.graph.node:
        if node.op_type != "MatMulInteger" or node.input[1] not in inits:
            continue
        for zp in node.input[2:]:
            if zp and (zp not in inits or numpy_helper.to_array(inits[zp]).any()):
                raise SystemExit(f"{node.name}: a zero point other than 0; the model covers zero points of 0 only")
        b = numpy_helper.to_array(inits[node.input[1]])
        if b.dtype != np.int8 or b.ndim != 2:
            continue  # u8·u8 or a batched B: not the saturating u8·s8 kernel
        found.append((node.name, node.input[0], node.output[0], b))
    return found


def session(model):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = os.cpu_count() or 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def capture(model, products, feeds):
    """Runs the graph with every product's uint8 input and int32 output as graph outputs; {name: array}."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for _, a, c, _ in products:
        for name, elem in ((a, TensorProto.UINT8), (c, TensorProto.INT32)):
            if name not in have:
                m.graph.output.append(helper.make_tensor_value_info(name, elem, None))
                have.add(name)
    sess = session(m)
    names = [o.name for o in sess.get_outputs()]
    got = {n: [] for n in names}
    for feed in feeds:
        feed = {i.name: feed[i.name] for i in sess.get_inputs()}
        for n, v in zip(names, sess.run(names, feed)):
            got[n].append(v)
    return got


def examples(model_path, args):
    """Batches of feeds: from --inputs (HDF5), --texts (tokenised by the model folder's tokenizer) or random."""
    if args.inputs:
        import h5py
        with h5py.File(args.inputs, "r") as f:
            rows = {n: f[n][()].astype(np.int64)[:args.examples] for n in ("input_ids", "attention_mask", "token_type_ids")}
    elif args.texts:
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(args.tokenizer or os.path.dirname(os.path.abspath(model_path)))
        with open(args.texts, encoding="utf-8") as f:
            lines = [l.rstrip("\n").split("\t") for l in f if l.strip()][:args.examples]
        second = [l[1] for l in lines] if all(len(l) > 1 for l in lines) else None  # sentence pairs
        enc = tok([l[0] for l in lines], second, padding=True, truncation=True, max_length=args.seq,
                  return_tensors="np")
        rows = {"input_ids": enc["input_ids"].astype(np.int64), "attention_mask": enc["attention_mask"].astype(np.int64),
                "token_type_ids": enc.get("token_type_ids", np.zeros_like(enc["input_ids"])).astype(np.int64)}
    else:
        rng = np.random.default_rng(0)
        ids = rng.integers(5, args.vocab, size=(args.examples, args.seq), dtype=np.int64)
        rows = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    return [{n: v[s:s + 8] for n, v in rows.items()} for s in range(0, len(rows["input_ids"]), 8)]


def check(model_path, args):
    """The report of (a) and (b) for one file, as a dict; "pass" says whether both hold."""
    model = onnx.load(model_path)
    meta = {p.key: p.value for p in model.metadata_props}
    products = weight_products(model)
    report = {"file": model_path, "weight_max_metadata": meta.get("headprune.int8_weight_max"),
              "products": len(products), "weights": {}, "activations": {}}
    report["weights"] = weight_report([b for _, _, _, b in products])
    got = capture(model, products, examples(model_path, args))
    rows, saturated, deviation, ort_is_model, ort_is_exact = 0, 0, 0, True, True
    for name, a_name, c_name, b in products:
        for a, c in zip(got[a_name], got[c_name]):
            a2 = a.reshape(-1, a.shape[-1])
            model_c, clamped = avx2_matmul(a2, b)
            exact = exact_matmul(a2, b)
            ort_c = c.reshape(-1, c.shape[-1]).astype(np.int64)
            rows += a2.shape[0]
            saturated += clamped
            deviation = max(deviation, int(np.abs(model_c - exact).max(initial=0)))
            ort_is_model &= bool(np.array_equal(ort_c, model_c))
            ort_is_exact &= bool(np.array_equal(ort_c, exact))
    report["activations"] = {"rows": rows, "saturated_pair_sums": saturated, "max_abs_int32_deviation": deviation,
                             "model_equals_exact": deviation == 0,
                             "onnxruntime_here_equals": ("both" if ort_is_model and ort_is_exact else
                                                         "the AVX2 model" if ort_is_model else
                                                         "the exact product" if ort_is_exact else "neither")}
    report["pass"] = report["weights"]["fits_int16"] and deviation == 0
    return report


def probe():
    """Runs one MatMulInteger in ONNX Runtime whose exact result needs more than int16 pair sums (a = 255,
    b = ±127) and random ones: which of the AVX2 model and the exact product ONNX Runtime computes here."""
    rng = np.random.default_rng(1)
    K, N = 64, 48
    b = rng.integers(-127, 128, size=(K, N)).astype(np.int8)
    b[:, 0] = 127
    a = rng.integers(0, 256, size=(33, K)).astype(np.uint8)
    a[0] = 255
    node = helper.make_node("MatMulInteger", ["a", "b"], ["c"])
    graph = helper.make_graph([node], "probe", [helper.make_tensor_value_info("a", TensorProto.UINT8, [None, K])],
                              [helper.make_tensor_value_info("c", TensorProto.INT32, [None, N])],
                              [numpy_helper.from_array(b, "b")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    c = session(m).run(["c"], {"a": a})[0].astype(np.int64)
    model_c, clamped = avx2_matmul(a, b)
    exact = exact_matmul(a, b)
    return {"clamped_pair_sums": clamped, "c[0,0] exact": int(exact[0, 0]), "c[0,0] AVX2 model": int(model_c[0, 0]),
            "c[0,0] ONNX Runtime": int(c[0, 0]), "onnxruntime_equals_model": bool(np.array_equal(c, model_c)),
            "onnxruntime_equals_exact": bool(np.array_equal(c, exact))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?")
    ap.add_argument("--inputs")
    ap.add_argument("--texts")
    ap.add_argument("--tokenizer")
    ap.add_argument("--examples", type=int, default=32)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=1000, help="random ids below this when no --inputs or --texts")
    ap.add_argument("--json")
    ap.add_argument("--probe", action="store_true")
    args = ap.parse_args()
    if args.probe:
        r = probe()
        print(json.dumps(r, indent=2))
        return 0
    if not args.model:
        ap.error("name an int8 ONNX file, or --probe")
    r = check(args.model, args)
    w, act = r["weights"], r["activations"]
    print(f"{args.model}: {r['products']} MatMulInteger u8·s8 weights (metadata weight max "
          f"{r['weight_max_metadata']}), max |w| {w['max_abs_weight']}")
    print(f"  (a) worst-case pair sum 255·(|w_k| + |w_k+1|) of one sign: {w['worst_pair_sum']} "
          f"({'fits' if w['fits_int16'] else 'exceeds'} int16's 32767); {w['pairs_that_can_saturate']} "
          f"(pair, column) sums can saturate")
    print(f"  (b) {act['rows']} activation rows: {act['saturated_pair_sums']} pair sums saturated, max |AVX2 - exact| "
          f"{act['max_abs_int32_deviation']} in int32; ONNX Runtime on this CPU equals {act['onnxruntime_here_equals']}")
    print("  exact in ONNX Runtime's AVX2 kernel: " + ("yes" if r["pass"] else "NO"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=2)
    return 0 if r["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
