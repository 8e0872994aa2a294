#!/usr/bin/env python3
"""tools/ort_avx2_model.py: the numpy model of ONNX Runtime's AVX2 u8·s8 MatMulInteger is right (hand cases, and
ONNX Runtime itself on this CPU computes either it or the exact product), the int8 export's graph
(tools/onnx_export.py --int8, weights ±63 by default) is exact under it, and a graph quantised with
--weight-max 127 (the export before issue #46) is not.

    ort_avx2_model_test.py --python VENV_PYTHON --scratch DIR
Exit 0 when every check holds, 1 when one fails, 77 (skipped) when the venv or onnxruntime is missing.
"""
import argparse
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ref_check import FAILURES, expect, in_venv  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(REPO, "tests", "data", "golden", "tiny_bert")
TINY_H5 = TINY + ".h5"
TOOLS = os.path.join(REPO, "tools")


def hand_cases(m):
    """Pair sums of the model against values worked out by hand."""
    import numpy as np
    a = np.array([[255, 255]], np.uint8)
    c, clamped = m.avx2_matmul(a, np.array([[127], [127]], np.int8))
    expect(c[0, 0] == 32767 and clamped == 1 and m.exact_matmul(a, np.array([[127], [127]]))[0, 0] == 64770,
           "255·127 + 255·127 = 64770 saturates to 32767")
    c, clamped = m.avx2_matmul(a, np.array([[-127], [-127]], np.int8))
    expect(c[0, 0] == -32768 and clamped == 1, "255·-127 + 255·-127 saturates to -32768")
    c, clamped = m.avx2_matmul(a, np.array([[63], [63]], np.int8))
    expect(c[0, 0] == 32130 and clamped == 0, "255·63 + 255·63 = 32130 fits int16")
    # Pairs are (0, 1), (2, 3): 127 at k = 1 and 2 sits in two pairs and never saturates; an odd K pads a zero.
    a3 = np.array([[255, 255, 255]], np.uint8)
    c, clamped = m.avx2_matmul(a3, np.array([[0], [127], [127]], np.int8))
    expect(c[0, 0] == 64770 and clamped == 0, "127 at k = 1 and k = 2 are in different pairs: exact, K odd")
    hi, lo = m.worst_pair_sums(np.array([[63, -63], [63, -63], [-5, 7]], np.int8))
    expect(hi.max() == 32130 and lo.min() == -32130 and hi.shape == (2, 2), "worst-case pair sums of ±63 weights")
    # Check (a) on the negative side alone (#61): int8 reaches -128 but only +127, so -128 and -1 in one pair can
    # reach 255·-129 = -32895 < -32768 and saturate, while 127 and 1 reach 255·128 = 32640 and fit.
    w = m.weight_report([np.array([[-128, 127], [-1, 1]], np.int8)])
    expect(w["pairs_that_can_saturate"] == 1 and w["worst_pair_sum"] == 32895 and not w["fits_int16"],
           "(a) a pair that saturates only on the negative side is found (-128 and -1: 255·-129 = -32895)")
    w = m.weight_report([np.array([[-127, 127], [-127, 1]], np.int8), np.array([[63], [63]], np.int8)])
    expect(w["pairs_that_can_saturate"] == 1 and w["worst_pair_sum"] == 64770 and w["max_abs_weight"] == 127,
           "(a) over several matrices: -127 and -127 saturate (255·-254), 127 and 1 fit")
    w = m.weight_report([np.array([[127], [1]], np.int8)])
    expect(w["pairs_that_can_saturate"] == 0 and w["fits_int16"], "(a) 127 and 1 (255·128 = 32640) fit int16")


def quantise(py, folder, weight_max):
    """model.int8.onnx of `folder` through the export script's own --int8 path; returns its copy's path."""
    logits = os.path.join(folder, "logits.h5")
    cmd = [py, os.path.join(TOOLS, "onnx_export.py"), folder, TINY_H5, "--int8", "--logits-out", logits]
    if weight_max is not None:
        cmd += ["--weight-max", str(weight_max)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    expect(r.returncode == 0, "onnx_export.py " + " ".join(cmd[4:]) + (": " + r.stderr[-400:] if r.returncode else ""))
    expect(f"±{weight_max or 63} per output channel" in r.stdout, f"its line names the range ±{weight_max or 63}")
    out = os.path.join(folder, f"w{weight_max or 'default'}.onnx")
    shutil.move(os.path.join(folder, "model.int8.onnx"), out)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--scratch", required=True)
    args = ap.parse_args()
    in_venv(args.python)
    sys.path.insert(0, TOOLS)
    try:
        import onnx
        import ort_avx2_model as m
        import onnx_export as ox
    except SystemExit as e:  # the tools exit 77 without onnxruntime
        sys.exit(e.code)
    except ImportError as e:
        print(f"SKIP: {e}")
        sys.exit(77)

    hand_cases(m)
    p = m.probe()
    print(f"      probe: ONNX Runtime here computes {p['c[0,0] ONNX Runtime']} for 64 × 255·127 "
          f"(exact {p['c[0,0] exact']}, AVX2 model {p['c[0,0] AVX2 model']})")
    expect(p["onnxruntime_equals_model"] or p["onnxruntime_equals_exact"],
           "ONNX Runtime on this CPU computes exactly the AVX2 model or the exact product (VNNI)")

    folder = os.path.join(args.scratch, "tiny")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(TINY, folder)
    ox.export(folder, os.path.join(folder, "model.onnx"))
    portable, wide = quantise(sys.executable, folder, None), quantise(sys.executable, folder, 127)
    for path, want in ((portable, 63), (wide, 127)):
        meta = {q.key: q.value for q in onnx.load(path).metadata_props}
        expect(meta.get("headprune.int8_weight_max") == str(want), f"{os.path.basename(path)} records weight max {want}")

    opts = argparse.Namespace(inputs=TINY_H5, texts=None, tokenizer=None, examples=64, seq=64, vocab=1000)
    r = m.check(portable, opts)
    w, act = r["weights"], r["activations"]
    print(f"      default (63): {w} {act}")
    expect(w["max_abs_weight"] <= 63, "the default graph's weights are within ±63")
    expect(w["worst_pair_sum"] <= 32767 and w["pairs_that_can_saturate"] == 0, "(a) no pair sum of it can saturate")
    expect(act["rows"] > 0 and act["saturated_pair_sums"] == 0 and act["model_equals_exact"],
           "(b) on the golden inputs the AVX2 model equals the exact product")
    expect(act["onnxruntime_here_equals"] == "both", "ONNX Runtime's own products equal the exact ones here")

    r = m.check(wide, opts)
    w, act = r["weights"], r["activations"]
    print(f"      --weight-max 127: {w} {act}")
    expect(w["worst_pair_sum"] > 32767 and w["pairs_that_can_saturate"] > 0, "(a) the 127 graph's pair sums can saturate")
    expect(act["saturated_pair_sums"] > 0 and act["max_abs_int32_deviation"] > 0,
           "(b) on the golden inputs the 127 graph saturates and differs from the exact product")
    expect(not r["pass"], "the check refuses the 127 graph")
    cli = [sys.executable, os.path.join(TOOLS, "ort_avx2_model.py"), "--inputs", TINY_H5]
    expect(subprocess.run(cli + [portable], capture_output=True).returncode == 0, "the tool exits 0 on the default graph")
    expect(subprocess.run(cli + [wide], capture_output=True).returncode == 1, "the tool exits 1 on the 127 graph")
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
