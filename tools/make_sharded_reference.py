#!/usr/bin/env python3
"""A sharded checkpoint written by Hugging Face transformers itself, for tests/core/sharded_test.cpp.

Usage: make_sharded_reference.py OUT_DIR
Writes OUT_DIR/model: a tiny random BertForSequenceClassification (3 layers, hidden 64, 3 labels; every parameter
drawn from N(0, 0.1), LayerNorms and biases too, so that a tensor read into the wrong place changes the logits) saved
with save_pretrained(max_shard_size="200KB"): model-0000i-of-0000N.safetensors + model.safetensors.index.json.
And OUT_DIR/inputs.h5: input_ids, attention_mask (two rows padded), token_type_ids and transformers' `logits`.
Exit 3 when this Python cannot import torch, transformers or h5py.
"""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_private import use_private_hf_home  # noqa: E402

use_private_hf_home()

try:
    import h5py
    import torch
    from transformers import BertConfig, BertForSequenceClassification
except ImportError as e:
    print(f"make_sharded_reference: {sys.executable} cannot import {e.name or e}; rerun scripts/setup.sh",
          file=sys.stderr)
    sys.exit(3)


def main() -> int:
    out = sys.argv[1]
    torch.manual_seed(62)
    cfg = BertConfig(vocab_size=500, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                     intermediate_size=96, max_position_embeddings=64, num_labels=3)
    model = BertForSequenceClassification(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.1)
    model.save_pretrained(os.path.join(out, "model"), max_shard_size="200KB", safe_serialization=True)
    if not os.path.exists(os.path.join(out, "model", "model.safetensors.index.json")):
        print("make_sharded_reference: transformers wrote no index (the model fits in one 200KB shard?)",
              file=sys.stderr)
        return 1
    ids = torch.randint(1, cfg.vocab_size, (4, 16))
    mask = torch.ones_like(ids)
    mask[1, 11:] = 0
    mask[3, 5:] = 0
    ids[mask == 0] = 0
    types = torch.zeros_like(ids)
    types[:, 8:] = 1
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
    with h5py.File(os.path.join(out, "inputs.h5"), "w") as f:
        f["input_ids"] = ids.numpy()
        f["attention_mask"] = mask.numpy()
        f["token_type_ids"] = types.numpy()
        f["logits"] = logits.double().numpy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
