#!/usr/bin/env python3
"""Loads a model folder written by headprune with Hugging Face transformers and compares its logits
with reference logits, so tests prove that our exports load in HF.

Usage: hf_check.py MODEL_DIR GOLDEN.h5 [--tol 1e-4] [--logits-key KEY] [--remote-code]
  GOLDEN.h5 holds input_ids, attention_mask, token_type_ids and the expected `logits` (or KEY).
  Default loader: AutoModelForSequenceClassification (AutoModelForTokenClassification for a tagger's folder, whose
  config.json names a *ForTokenClassification) without remote code, i.e. transformers' own class of the
  config's model_type (BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA; transformers 4 replays config.pruned_heads).
  --remote-code: AutoModelForSequenceClassification with trust_remote_code=True, i.e. the
  modeling_headprune.py that a slimmed export carries (the way transformers 5 loads it).
Checks, in order:
  1. max |HF - expected| <= tol over all examples;
  2. output_attentions=True gives, per layer, [batch, kept heads, seq, seq] with the kept heads of
     config.heads_per_layer (when the config has it);
  3. save_pretrained of the loaded model reloads with the same loader and gives the same logits.
Exit 0 when all hold, 1 otherwise (each check prints a line); 3 when this Python cannot import torch,
transformers or h5py (a broken or half-installed venv: one line naming the module; headprune's pruning run
skips the optional transformers 5 check then, core/base/process.h kPythonCannotImport).
Nothing is left behind: transformers' caches (its modules cache, where a remote-code model's modeling file
is copied) are private to this process and removed at exit (tools/hf_private.py, #44).
The reference environment (scripts/setup_python.sh) pins transformers 4.40.2; `--v5` adds transformers 5.
"""
import argparse
import inspect
import json
import os
import sys
import tempfile

sys.dont_write_bytecode = True  # no tools/__pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tools/, also when run by runpy.run_path
from hf_private import use_private_hf_home  # noqa: E402

use_private_hf_home()  # before transformers is imported, which reads HF_HOME and HF_MODULES_CACHE once

try:
    import h5py
    import torch
    import transformers
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification
except ImportError as e:
    print(f"hf_check: {sys.executable} cannot import {e.name or e} ({e}); rerun scripts/setup.sh (with --v5 for "
          "the transformers 5 venv)", file=sys.stderr)
    sys.exit(3)


def load(model_dir, remote_code):
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    has_modeling_file = "auto_map" in config
    tagger = any(a.endswith("ForTokenClassification") for a in config.get("architectures") or [])
    auto = AutoModelForTokenClassification if tagger else AutoModelForSequenceClassification
    if remote_code and has_modeling_file:
        model = auto.from_pretrained(model_dir, trust_remote_code=True)
    else:
        # eager attention: the default (SDPA) returns no attention maps. A folder without the modeling file (a
        # model with whole layers removed and nothing narrower) is transformers' own class with remote code too.
        model = auto.from_pretrained(model_dir, attn_implementation="eager", trust_remote_code=remote_code)
    return model.eval()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("golden")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--logits-key", default="logits")
    ap.add_argument("--remote-code", action="store_true")
    args = ap.parse_args()
    with h5py.File(args.golden, "r") as f:
        inputs = {k: torch.tensor(f[k][()]) for k in ("input_ids", "attention_mask", "token_type_ids")}
        want = torch.tensor(f[args.logits_key][()]).double()
    tag = f"hf_check: {args.model_dir} (transformers {transformers.__version__}, " \
          f"{'remote code' if args.remote_code else 'its own class'})"
    model = load(args.model_dir, args.remote_code)
    # Only the inputs the architecture takes (DistilBERT has no token types).
    accepted = inspect.signature(model.forward).parameters
    inputs = {k: v for k, v in inputs.items() if k in accepted}
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    diff = (out.logits.double() - want).abs().max().item()
    ok = diff <= args.tol
    print(f"{tag}: {type(model).__name__}: max |HF - expected| = {diff:.3g} over {len(want)} examples (tol {args.tol:g})")

    per_layer = getattr(model.config, "heads_per_layer", None)
    if per_layer is not None:
        got = [a.shape[1] for a in out.attentions]
        b, t = inputs["input_ids"].shape
        shapes_ok = got == list(per_layer) and all(tuple(a.shape) == (b, a.shape[1], t, t) for a in out.attentions)
        print(f"{tag}: attentions: heads per layer {got}, config.heads_per_layer {list(per_layer)}: "
              f"{'ok' if shapes_ok else 'MISMATCH'}")
        ok = ok and shapes_ok

    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        again = load(tmp, args.remote_code)
        with torch.no_grad():
            logits = again(**inputs).logits.double()
    round_trip = (logits - out.logits.double()).abs().max().item()
    print(f"{tag}: save_pretrained + reload: max |reloaded - loaded| = {round_trip:.3g}")
    ok = ok and round_trip <= args.tol
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
