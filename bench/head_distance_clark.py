"""Clark et al.'s head-distance loop (attention-analysis/head_distances.py) on the examples that
bench/analyze_bench wrote with --dump, timed against headprune's C++ head distances, and checked: both
must give the same [L*H, L*H] matrix of Jensen-Shannon divergences summed over queries and examples.

    ./build/bench/analyze_bench --task qnli --examples 1000 --distances-only --dump /tmp/hd
    ~/.cache/headprune/venv/bin/python bench/head_distance_clark.py --dump /tmp/hd

The loop below is Clark's, with 144 replaced by the model's L*H and the per-document pickle write
left out (it is I/O, not the computation). The attention maps come from Hugging Face transformers
(eager attention, float32, each document at its own length as Clark's extraction stores them); their
extraction is not timed, only the distance loop is. Not a test; prints numbers.
"""

import argparse
import os
import time

import numpy as np


def read_docs(path):
    docs = []
    with open(path) as f:
        for line in f:
            pairs = [tok.split(":") for tok in line.split()]
            docs.append(([int(i) for i, _ in pairs], [int(t) for _, t in pairs]))
    return docs


def attention_maps(model_dir, docs, threads):
    import torch
    from transformers import BertModel

    torch.set_num_threads(threads)
    model = BertModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    maps = []
    with torch.no_grad():
        for ids, types in docs:
            out = model(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([types]), output_attentions=True)
            maps.append(np.stack([a[0].numpy() for a in out.attentions]))  # [L, H, n, n] float32
    return maps


def clark_head_distances(maps):
    """head_distances.py's loop for n_heads = L*H."""
    n_heads = maps[0].shape[0] * maps[0].shape[1]
    js_distances = np.zeros([n_heads, n_heads])
    for attns in maps:
        attns_flat = attns.reshape([n_heads, attns.shape[2], attns.shape[3]])
        for head in range(n_heads):
            head_attns = np.expand_dims(attns_flat[head], 0)
            head_attns_smoothed = (0.001 / head_attns.shape[1]) + (head_attns * 0.999)
            attns_flat_smoothed = (0.001 / attns_flat.shape[1]) + (attns_flat * 0.999)
            m = (head_attns_smoothed + attns_flat_smoothed) / 2
            js = -head_attns_smoothed * np.log(m / head_attns_smoothed)
            js += -attns_flat_smoothed * np.log(m / attns_flat_smoothed)
            js /= 2
            js = js.sum(-1).sum(-1)
            js_distances[head] += js
    return js_distances


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dump", required=True, help="folder written by analyze_bench --dump")
    p.add_argument("--model", default="checkpoints/all-MiniLM-L6-v2")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")

    docs = read_docs(os.path.join(args.dump, "ids.txt"))
    maps = attention_maps(args.model, docs, args.threads)
    n_heads = maps[0].shape[0] * maps[0].shape[1]
    t0 = time.perf_counter()
    ref = clark_head_distances(maps)
    seconds = time.perf_counter() - t0
    ours = np.fromfile(os.path.join(args.dump, "js.bin"), dtype=np.float64).reshape(n_heads, n_heads)
    cpp_seconds = float(open(os.path.join(args.dump, "seconds.txt")).read())
    tokens = np.mean([m.shape[-1] for m in maps])
    print(f"{len(docs)} documents, {tokens:.1f} tokens on average, {n_heads} heads")
    print(f"Clark's loop (numpy {np.__version__}): {seconds:.2f} s, {1e3 * seconds / len(docs):.1f} ms/document")
    print(f"headprune (C++): {cpp_seconds:.3f} s -> {seconds / cpp_seconds:.1f}x faster (target >= 20x)")
    off = ~np.eye(n_heads, dtype=bool)
    rel = np.abs(ours - ref)[off] / np.abs(ref)[off]
    print(f"matrices: max relative difference {rel.max():.2e} over the off-diagonal entries "
          f"(float32 maps; Clark's diagonal is 0 up to rounding: max {np.abs(np.diag(ref)).max():.1e})")
    return 0 if rel.max() < 1e-3 else 1


if __name__ == "__main__":
    raise SystemExit(main())
