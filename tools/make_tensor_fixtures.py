#!/usr/bin/env python3
"""Makes the tensor-file fixtures of tests/core/safetensors_test.cpp (committed under tests/data/tensors/).

Pinned versions used for the committed files: torch 1.13.0 (Debian python3-torch), safetensors 0.8.0,
transformers 4.40.2, numpy 1.24. Run with the project venv:
    /root/.cache/headprune/venv/bin/python tools/make_tensor_fixtures.py make
Each fixture X gets a sidecar X.expected.json {name: {dtype, shape, values (flattened, row-major)}},
written from the Python tensors, so the C++ test compares against values it did not produce.

    make_tensor_fixtures.py check FILE.safetensors EXPECTED.json
reads FILE with Python's safetensors and exits 1 unless it matches EXPECTED exactly (used by the
hidden [.hf] test to check that files our writer produces load in HF's reader).
"""
import json
import os
import sys

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "tensors")
NAMES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
         torch.int64: "I64", torch.int32: "I32"}


def sidecar(tensors, path):
    out = {}
    for k, t in sorted(tensors.items()):
        vals = t.reshape(-1)
        vals = vals.tolist() if t.dtype in (torch.int64, torch.int32) else vals.double().tolist()
        out[k] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "values": vals}
    with open(path, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


def small_tensors():
    # Values are exact in every dtype used (small halves/integers), except F64 thirds (exact in JSON).
    return {
        "bert.embeddings.word_embeddings.weight": torch.arange(12, dtype=torch.float32).reshape(3, 4) * 0.5 - 2,
        "half": torch.arange(6, dtype=torch.float16).reshape(2, 3) * 0.25,
        "bf16": torch.arange(5, dtype=torch.bfloat16) - 2.5,
        "position_ids": torch.arange(6, dtype=torch.int64).reshape(1, 6),
        "ids32": torch.arange(4, dtype=torch.int32) * -3,
        "double": torch.arange(4, dtype=torch.float64).reshape(2, 2) / 3,
        "scalar": torch.tensor(7.0),
        "empty": torch.zeros(0, 3),
    }


def make():
    from safetensors.torch import save_file
    os.makedirs(OUT, exist_ok=True)

    t = small_tensors()
    save_file(t, os.path.join(OUT, "hf_small.safetensors"), metadata={"format": "pt"})
    sidecar(t, os.path.join(OUT, "hf_small.expected.json"))

    # A state dict of a tiny nn.Module with known values, saved the way HF saves pytorch_model.bin.
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2))
    m.register_buffer("position_ids", torch.arange(5).reshape(1, 5))
    with torch.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(torch.arange(p.numel(), dtype=torch.float32).reshape(p.shape) * 0.125 + i)
    sd = m.state_dict()
    # A strided view into 0.weight's storage (offset 1, stride (1, 3)): exercises shared storages.
    sd["weight_view"] = sd["0.weight"].t()[1:]
    torch.save(sd, os.path.join(OUT, "tiny_state_dict.bin"))
    sidecar(sd, os.path.join(OUT, "tiny_state_dict.expected.json"))

    # A tiny transformers BertModel (random init, seeded), as save_pretrained would write it.
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=8, max_position_embeddings=8)
    sd = BertModel(cfg).state_dict()
    torch.save(sd, os.path.join(OUT, "tiny_bert.bin"))
    sidecar(sd, os.path.join(OUT, "tiny_bert.expected.json"))


def check(path, expected_path):
    from safetensors.torch import load_file
    got = load_file(path)
    with open(expected_path) as f:
        want = json.load(f)
    ok = sorted(got) == sorted(want)
    for k, w in want.items():
        t = got.get(k)
        if t is None or NAMES[t.dtype] != w["dtype"] or list(t.shape) != w["shape"]:
            print(f"{k}: dtype/shape mismatch", file=sys.stderr)
            ok = False
            continue
        vals = t.reshape(-1)
        vals = vals.tolist() if t.dtype in (torch.int64, torch.int32) else vals.double().tolist()
        if vals != w["values"]:
            print(f"{k}: values differ", file=sys.stderr)
            ok = False
    print("match" if ok else "MISMATCH", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "make":
        make()
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
