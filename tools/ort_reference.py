#!/usr/bin/env python3
"""ONNX Runtime's reference points on the compression frontiers (`prune --max-drop D`, prune/frontier/frontier_timing.h):
the unpruned model folder exported to ONNX (float32, as tools/onnx_export.py exports; --sentence: a
sentence-transformers folder to its pooled embedding, normalised where it lists Normalize) and quantised by ONNX
Runtime's own quantize_dynamic (int8 weights per output channel, u8 activations quantised at run time), each run
on the evaluation rows (outputs written for headprune to score with its own metric code) and timed at batch x seq on
random ids (median of --reps runs after one warm-up).

Usage: ort_reference.py MODEL_DIR INPUTS.h5 --batch B --seq S --out DIR [--reps 10] [--sentence]
  INPUTS.h5: input_ids, attention_mask, token_type_ids [N, S], padded, in dataset order.
  Writes DIR/ort.fp32.onnx, DIR/ort.int8.onnx (headprune removes them and INPUTS.h5 afterwards), DIR/ort_logits.h5
  (datasets fp32 and int8, [N, C]; with --sentence DIR/ort_embeddings.h5, [N, D]) and last
  DIR/ort.json: {"fp32": {"ms": ...}, "int8": {"ms": ...}, "onnxruntime": version, "threads": n}.
Exit 77 when onnxruntime (or, with --sentence, sentence-transformers) is not installed (headprune then says the
reference rows were skipped).
"""
import argparse
import json
import logging
import os
import sys

sys.dont_write_bytecode = True  # no tools/__pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_export  # noqa: E402  (exits 77 without onnxruntime; keeps ~/.cache/huggingface untouched)

import h5py  # noqa: E402
import transformers  # noqa: E402
from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("inputs")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--sentence", action="store_true", help="a sentence-transformers folder: embeddings out")
    args = ap.parse_args()
    if args.sentence:
        try:
            import sentence_transformers  # noqa: F401
        except ImportError:
            print("ort_reference: sentence-transformers is not installed here", file=sys.stderr)
            return 77
    os.makedirs(args.out, exist_ok=True)
    fp32, int8 = os.path.join(args.out, "ort.fp32.onnx"), os.path.join(args.out, "ort.int8.onnx")
    onnx_export.export(args.model_dir, fp32, sentence=args.sentence)
    logging.getLogger().setLevel(logging.ERROR)  # quantize_dynamic advises its pre-processing step on every call
    quantize_dynamic(fp32, int8, per_channel=True, weight_type=QuantType.QInt8)
    vocab = transformers.AutoConfig.from_pretrained(args.model_dir).vocab_size
    result = {"onnxruntime": onnx_export.ort.__version__, "threads": os.cpu_count() or 1}
    outputs = os.path.join(args.out, "ort_embeddings.h5" if args.sentence else "ort_logits.h5")
    with h5py.File(outputs, "w") as f:
        for name, path in (("fp32", fp32), ("int8", int8)):
            sess = onnx_export.session(path)
            f[name] = onnx_export.run_rows(sess, args.inputs)
            result[name] = {"ms": onnx_export.latency_ms(sess, args.batch, args.seq, vocab, reps=args.reps)}
            print(f"ort_reference: {name}: {result[name]['ms']:.1f} ms at batch {args.batch} x {args.seq}")
    with open(os.path.join(args.out, "ort.json.tmp"), "w") as f:
        json.dump(result, f)
    os.replace(os.path.join(args.out, "ort.json.tmp"), os.path.join(args.out, "ort.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
