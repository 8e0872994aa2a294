#!/usr/bin/env python3
"""The catalogue of bad inputs (docs/errors.md), each entry a test.

Every entry builds its input in a scratch folder of its own, runs `prune` on it and checks the exit code,
the exact error line (the scratch folder written as $SCRATCH) and what must not happen (a file written, a
command executed, an earlier result damaged). This table is the only copy: `--write-doc` renders
docs/errors.md from it and the `errors.doc` test fails when that file is stale.

    tests/errors/catalogue.py --prune build/bin/prune --fail-io build/tests/libhp_fail_io.so --entry ID
    tests/errors/catalogue.py --prune build/bin/prune --fail-io ... --show   # what prune prints now
    tests/errors/catalogue.py --write-doc | --check-doc | --list

Standard library only: the inputs are written byte by byte by tests/errors/fixtures.py.
"""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys

import fixtures as fx

L0Q = "bert.encoder.layer.0.attention.self.query.weight"
WORD = "bert.embeddings.word_embeddings.weight"


def model_eval(model, *extra):
    """prune eval of a model folder on the small mnli_subset data root beside it; its default result file
    goes into the scratch folder too (an eval result is replaced only by the same evaluation)."""
    return ["eval", "--model", model, "--task", "mnli_subset", "--max-seq-len", "32", "--data-root",
            fx.glue_root(os.path.dirname(model)), "--set", "run.out_dir=" + os.path.dirname(model) + "/runs", *extra]


def weights(edit):
    """The tiny model with model.safetensors = edit(header, data) -> bytes."""
    def build(s):
        m = fx.copy_tiny(s + "/model")
        fx.edit_weights(m, edit)
        return model_eval(m)
    return build


def header_edit(change):
    """The tiny model with change(header) applied to its safetensors header (data unchanged)."""
    def edit(h, d):
        change(h)
        return fx.safetensors_bytes(h, d)
    return weights(edit)


def config(**changes):
    return lambda s: model_eval(fx.copy_tiny(s + "/model", config=changes))


def vocab(edit):
    def build(s):
        m = fx.copy_tiny(s + "/model")
        with open(m + "/vocab.txt") as f:
            lines = f.read().splitlines()
        with open(m + "/vocab.txt", "w") as f:
            f.write("\n".join(edit(lines)) + "\n")
        return model_eval(m)
    return build


def pickle_model(module, name):
    """A folder with a pytorch_model.bin whose pickle calls module.name('touch $SCRATCH/pwned')."""
    def build(s):
        m = fx.copy_tiny(s + "/model")
        os.remove(m + "/model.safetensors")
        fx.torch_zip(m + "/pytorch_model.bin", fx.global_call_pickle(module, name, f"touch {s}/pwned"))
        return model_eval(m)
    return build


def not_created(relative):
    return lambda s: f"{relative} was created" if os.path.exists(os.path.join(s, relative)) else None


def sst2(content, split="dev.tsv", *extra):
    """prune eval of the 2-label tiny model on an SST-2 split with these bytes."""
    def build(s):
        root = fx.task_root(s, "SST-2", split, content)
        return ["eval", "--model", fx.two_label_tiny(s + "/model"), "--task", "sst2", "--max-seq-len", "32",
                "--data-root", root, "--output", s + "/result.json", *extra]
    return build


def same_result_as_clean(s):
    """The eval of an accepted odd file gives the metric of the clean file."""
    clean = os.path.join(s, "clean")
    root = fx.task_root(clean, "SST-2", "dev.tsv", "sentence\tlabel\n" + fx.sst2_rows())
    got = subprocess.run([PRUNE, "eval", "--model", s + "/model", "--task", "sst2", "--max-seq-len", "32",
                          "--data-root", root, "--output", clean + "/result.json"], capture_output=True, text=True)
    if got.returncode != 0:
        return "the clean file failed: " + got.stderr[-300:]
    a, b = (json.load(open(p)) for p in (s + "/result.json", clean + "/result.json"))
    return None if a.get("metrics") == b.get("metrics") else f"metrics differ: {a.get('metrics')} vs {b.get('metrics')}"


def plain(*args):
    return lambda s: [a.replace("$TINY", fx.TINY) for a in args]


def eval_with(*extra):
    return lambda s: model_eval(fx.copy_tiny(s + "/model"), *extra)


def yaml_config(text, *extra):
    def build(s):
        fx.copy_tiny(s + "/model")
        with open(s + "/run.yaml", "w") as f:
            f.write(text.replace("$SCRATCH", s))
        return ["eval", "--config", s + "/run.yaml", "--set", "run.out_dir=" + s + "/runs", *extra]
    return build


YAML_HEAD = "model:\n  path: $SCRATCH/model\ndata:\n  task: mnli_subset\n  max_seq_len: 32\n"

E = []  # (id, input, build, exit code, error line, after)


def add(id, what, build, code, line, after=None, env=None, warning=None, keeps_work=False, needs=None, cwd=None):
    """`warning`: a line that must be printed as a warning too (without the time and tag). `keeps_work`: a run
    that fails after finishing some of its work keeps that work for --resume (every other refused command
    leaves nothing new). `needs`: a function giving the reason to skip the entry (exit 77) on this machine, or
    None (the reference Python for a check that runs ONNX Runtime). `cwd`: the folder, relative to the scratch
    folder, that prune runs in (default: the test's own)."""
    E.append({"id": id, "what": what, "build": build, "code": code, "line": line, "after": after, "env": env,
              "warning": warning, "keeps_work": keeps_work, "needs": needs, "cwd": cwd})


# --- safetensors -------------------------------------------------------------------------------------------
add("st-header-past-end", "safetensors header length larger than the file",
    weights(lambda h, d: fx.raw_safetensors(json.dumps(h), d, length=10**6)), 1,
    "error: $SCRATCH/model/model.safetensors: header length 1000000 bytes runs past the end of the file (84836 "
    "bytes, the first 8 of them the length); the file is truncated; re-download or re-export the checkpoint")
add("st-header-one-past", "safetensors header length one byte past the end of the file",
    weights(lambda h, d: fx.raw_safetensors(json.dumps(h), d, length=len(json.dumps(h)) + len(d) + 1)), 1,
    "error: $SCRATCH/model/model.safetensors: header length 84829 bytes runs past the end of the file (84836 bytes, "
    "the first 8 of them the length); the file is truncated; re-download or re-export the checkpoint")
add("st-header-zero", "safetensors header length 0", weights(lambda h, d: fx.raw_safetensors("", d, length=0)), 1,
    "error: $SCRATCH/model/model.safetensors: header length is 0, so there is no JSON header; the file is not safetensors; re-download or re-export the checkpoint")
add("st-header-huge", "safetensors header length 2^40 in a small file",
    weights(lambda h, d: fx.raw_safetensors(json.dumps(h), d, length=2**40)), 1,
    "error: $SCRATCH/model/model.safetensors: header length 1099511627776 bytes is above the 100 MB limit; the file is corrupt or not safetensors; re-download or re-export the checkpoint")
add("st-header-not-json", "safetensors header that is not JSON",
    weights(lambda h, d: fx.raw_safetensors("{\"a\": [1, 2", d)), 1,
    "error: $SCRATCH/model/model.safetensors: header is not valid JSON ([json.exception.parse_error.101] parse error at line 1, column 12: syntax error while parsing array - unexpected end of input; expected ']'); re-download or re-export the checkpoint")
add("st-header-not-object", "safetensors header that is a JSON array",
    weights(lambda h, d: fx.raw_safetensors("[1, 2, 3]", d)), 1,
    "error: $SCRATCH/model/model.safetensors: header JSON is not an object; re-download or re-export the checkpoint")
add("st-offsets-past-data", "tensor offsets beyond the data section",
    header_edit(lambda h: h[L0Q].update(data_offsets=[h[L0Q]["data_offsets"][0], 10**7])), 1,
    "error: $SCRATCH/model/model.safetensors: tensor 'bert.encoder.layer.0.attention.self.query.weight' shape [32, 32] F32 needs 4096 bytes but data_offsets span 9969920; re-download or re-export the checkpoint")
add("st-offsets-overlap", "two tensors sharing bytes",
    header_edit(lambda h: h["bert.embeddings.LayerNorm.weight"].update(data_offsets=[64, 192])), 1,
    "error: $SCRATCH/model/model.safetensors: tensors 'bert.embeddings.LayerNorm.bias' [0, 128] and 'bert.embeddings.LayerNorm.weight' [64, 192] overlap; re-download or re-export the checkpoint")
add("st-offsets-vs-shape", "offsets that do not span shape x dtype bytes",
    header_edit(lambda h: h[L0Q].update(shape=[32, 31])), 1,
    "error: $SCRATCH/model/model.safetensors: tensor 'bert.encoder.layer.0.attention.self.query.weight' shape [32, 31] F32 needs 3968 bytes but data_offsets span 4096; re-download or re-export the checkpoint")
add("st-offsets-negative", "a negative data offset (was \"not [begin, end] with begin <= end\")",
    header_edit(lambda h: h[L0Q].update(data_offsets=[-8, h[L0Q]["data_offsets"][1]])), 1, "error: $SCRATCH/model/model.safetensors: tensor 'bert.encoder.layer.0.attention.self.query.weight' data_offsets [-8,34176] holds a negative or non-integer offset; re-download or re-export the checkpoint")
add("st-offsets-reversed", "data offsets whose end is before their begin",
    header_edit(lambda h: h[L0Q].update(data_offsets=list(reversed(h[L0Q]["data_offsets"])))), 1, "error: $SCRATCH/model/model.safetensors: tensor 'bert.encoder.layer.0.attention.self.query.weight' data_offsets [34176,30080] end before they begin; re-download or re-export the checkpoint")
add("st-unknown-dtype", "an unknown dtype", header_edit(lambda h: h[L0Q].update(dtype="F12")), 1,
    "error: $SCRATCH/model/model.safetensors: tensor 'bert.encoder.layer.0.attention.self.query.weight' has unsupported dtype 'F12' (supported: F64, F32, F16, BF16, I64, I32); convert it before export, e.g. model.float() in Python")
LN = "bert.embeddings.LayerNorm.weight"
add("st-int64-weight", "a weight stored as int64",
    weights(lambda h, d: fx.rebuild(h, d, {LN: ("I64", [32], struct.pack("<32q", *range(32)))})), 1,
    "error: $SCRATCH/model/model.safetensors: bert.embeddings.LayerNorm.weight is stored as int64 (I64), and a weight must be floating point (F32, F16, BF16 or F64); re-export the checkpoint from the model in Python")
add("st-shape-wraps", "a shape whose byte count wraps 64 bits",
    header_edit(lambda h: h[L0Q].update(shape=[2**62, 8])), 1,
    "error: $SCRATCH/model/model.safetensors: tensor 'bert.encoder.layer.0.attention.self.query.weight' shape [4611686018427387904, 8] F32 needs more than 2^64 bytes but data_offsets span 4096; re-download or re-export the checkpoint")
add("st-negative-shape", "a negative dimension", header_edit(lambda h: h[L0Q].update(shape=[-32, -32])), 1,
    "error: $SCRATCH/model/model.safetensors: tensor 'bert.encoder.layer.0.attention.self.query.weight' shape [-32,-32] has a non-integer or negative dimension; re-download or re-export the checkpoint")
add("st-duplicate-name", "the same tensor name twice in the header",
    weights(lambda h, d: fx.raw_safetensors(json.dumps(h)[:-1] + ", \"" + L0Q + "\": " + json.dumps(h[L0Q]) + "}", d)), 1,
    "error: $SCRATCH/model/model.safetensors: tensor 'bert.encoder.layer.0.attention.self.query.weight' is listed "
    "twice in the header; re-download or re-export the checkpoint")
add("st-truncated", "a file cut inside its data section", weights(lambda h, d: fx.safetensors_bytes(h, d)[:-100]), 1,
    "error: $SCRATCH/model/model.safetensors: tensor 'classifier.weight' data_offsets [79796, 80180] run past the data buffer (80080 bytes); the file is truncated; re-download or re-export the checkpoint")
add("st-gap", "bytes that no tensor names (a tensor's entry removed, its bytes kept)",
    header_edit(lambda h: h.pop(L0Q)), 1,
    "error: $SCRATCH/model/model.safetensors: data buffer has a gap of 4096 bytes before tensor 'bert.encoder.layer.0.attention.self.value.bias'; re-download or re-export the checkpoint")
add("st-missing-tensor", "a required tensor absent", weights(lambda h, d: fx.rebuild(h, d, drop=(L0Q,))), 1,
    "error: $SCRATCH/model/model.safetensors: missing required tensors bert.encoder.layer.0.attention.self.query.weight (key prefix found: 'bert.'); the checkpoint is incomplete or not a BERT encoder")
add("st-wrong-shape", "a tensor of the wrong shape for config.json",
    header_edit(lambda h: h[L0Q].update(shape=[16, 64])), 1,
    "error: $SCRATCH/model/model.safetensors: bert.encoder.layer.0.attention.self.query.weight has shape [16, 64], expected [32, 32] from config.json; the weights and config.json do not belong together")

# --- sharded safetensors (model.safetensors.index.json + model-0000i-of-0000N.safetensors, #62) ------------
SHARD1, SHARD2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
CLS = "classifier.bias"  # in the second shard


def sharded(edit=None, index_text=None, after_files=None):
    """The tiny model in two shards, edit(index, shards) applied; index_text replaces the index's text;
    after_files(s, model) adds files."""
    def build(s):
        m = fx.copy_tiny(s + "/model")
        fx.shard_weights(m, 2, edit)
        if index_text is not None:
            with open(m + "/model.safetensors.index.json", "w") as f:
                f.write(index_text)
        if after_files:
            after_files(s, m)
        return model_eval(m)
    return build


def also_in_first(index, shards):
    """classifier.bias in both shard files (the index puts it in the second)."""
    h1, d1 = shards[SHARD1]
    h2, d2 = shards[SHARD2]
    a, b = h2[CLS]["data_offsets"]
    h1 = dict(h1)
    h1[CLS] = {"dtype": h2[CLS]["dtype"], "shape": h2[CLS]["shape"], "data_offsets": [len(d1), len(d1) + b - a]}
    shards[SHARD1] = (h1, d1 + d2[a:b])


def outside_shard(s, model):
    """A valid shard outside the model folder, holding the tensors the index puts there."""
    shutil.copy(os.path.join(model, SHARD2), os.path.join(s, "outside.safetensors"))


add("st-shard-missing", "a sharded checkpoint whose index names a shard that is missing",
    sharded(lambda i, sh: sh.pop(SHARD2)), 1,
    "error: $SCRATCH/model/model-00002-of-00002.safetensors: shard missing, but model.safetensors.index.json puts "
    "tensors in it; download every shard the index names (or save the model again with save_pretrained)")
add("st-shard-lacks-tensor", "an index that puts a tensor in a shard that does not hold it",
    sharded(lambda i, sh: i["weight_map"].update({CLS: SHARD1})), 1,
    "error: $SCRATCH/model/model-00001-of-00002.safetensors: does not hold tensor 'classifier.bias', which "
    "model.safetensors.index.json puts in it (model-00002-of-00002.safetensors does); re-download the checkpoint, or "
    "save it again with save_pretrained")
add("st-shard-twice", "a tensor in two shards (both files hold it)", sharded(also_in_first), 1,
    "error: $SCRATCH/model/model.safetensors.index.json: tensor 'classifier.bias' is in two shards, "
    "model-00001-of-00002.safetensors and model-00002-of-00002.safetensors; re-download the checkpoint, or save it "
    "again with save_pretrained")
add("st-index-twice", "a tensor listed twice in the index's weight_map, in two shards",
    sharded(index_text='{"weight_map": {"classifier.bias": "' + SHARD1 + '", "classifier.bias": "' + SHARD2 + '"}}'),
    1, "error: $SCRATCH/model/model.safetensors.index.json: tensor 'classifier.bias' is listed twice in weight_map (a "
    "tensor in two shards); re-download the checkpoint, or save it again with save_pretrained")
add("st-shard-unlisted", "a shard holding a tensor the index does not list",
    sharded(lambda i, sh: i["weight_map"].pop(CLS)), 1,
    "error: $SCRATCH/model/model-00002-of-00002.safetensors: holds tensor 'classifier.bias', which "
    "model.safetensors.index.json does not list; re-download the checkpoint, or save it again with save_pretrained")
add("st-index-not-json", "a model.safetensors.index.json that is not JSON", sharded(index_text='{"weight_map": {'), 1,
    "error: $SCRATCH/model/model.safetensors.index.json: not valid JSON ([json.exception.parse_error.101] parse error "
    "at line 1, column 17: syntax error while parsing object key - unexpected end of input; expected string "
    "literal); re-download the checkpoint, or save it again with save_pretrained")
add("st-index-no-weight-map", "a model.safetensors.index.json without weight_map",
    sharded(index_text='{"metadata": {"total_size": 84000}}'), 1,
    "error: $SCRATCH/model/model.safetensors.index.json: no weight_map (the table of which shard holds each tensor); "
    "re-download the checkpoint, or save it again with save_pretrained")
add("st-index-outside", "an index that puts tensors in a shard outside the model folder (\"../outside.safetensors\", "
    "a valid file there: never read)",
    sharded(lambda i, sh: i["weight_map"].update({k: "../outside.safetensors" for k, v in i["weight_map"].items()
                                                  if v == SHARD2}), after_files=outside_shard), 1,
    "error: $SCRATCH/model/model.safetensors.index.json: weight_map puts tensor 'bert.encoder.layer.0.output.dense.weight' in "
    "'../outside.safetensors', which is not a file beside the index (a shard must be a plain file name in the model "
    "folder); refused; re-download the checkpoint, or save it again with save_pretrained")

# --- pytorch_model.bin -------------------------------------------------------------------------------------
add("bin-global-os-system", "pytorch_model.bin whose pickle calls os.system (never executed)",
    pickle_model("os", "system"), 1,
    "error: $SCRATCH/model/pytorch_model.bin: data.pkl calls unsupported global 'os.system'; save a flat state dict: torch.save(model.state_dict(), path)",
    not_created("pwned"))
add("bin-global-eval", "pytorch_model.bin whose pickle calls builtins.eval (never executed)",
    pickle_model("builtins", "eval"), 1,
    "error: $SCRATCH/model/pytorch_model.bin: data.pkl calls unsupported global 'builtins.eval'; save a flat state dict: torch.save(model.state_dict(), path)",
    not_created("pwned"))


def not_a_zip(s):
    m = fx.copy_tiny(s + "/model")
    os.remove(m + "/model.safetensors")
    with open(m + "/pytorch_model.bin", "wb") as f:
        f.write(b"\x80\x02}q\x00.")  # a legacy (pre-1.6, non-zip) torch.save file
    return model_eval(m)


def pickle_file(name):
    """A folder with a pytorch_model.bin holding tests/data/bad/fuzz/<name> as its data.pkl."""
    def build(s):
        m = fx.copy_tiny(s + "/model")
        os.remove(m + "/model.safetensors")
        fx.torch_zip(m + "/pytorch_model.bin", open(os.path.join(fx.REPO, "tests/data/bad/fuzz", name), "rb").read())
        return model_eval(m)
    return build


add("bin-fuzz-dict-cycle", "a pickle whose dict holds itself (found by fuzz_pickle: was a memory leak)",
    pickle_file("pickle-dict_cycle.pkl"), 1,
    "error: $SCRATCH/model/pytorch_model.bin: data.pkl reads a memo slot it never wrote; re-download or re-export "
    "the checkpoint")
add("bin-not-zip", "pytorch_model.bin in the legacy non-zip format", not_a_zip, 1,
    "error: $SCRATCH/model/pytorch_model.bin: legacy (pre-1.6) torch.save format, which headprune cannot read; convert it without running its pickle: with torch>=1.13, safetensors.torch.save_file(torch.load(p, weights_only=True), 'model.safetensors') beside it (weights_only refuses code in the file; a plain torch.load would run it)")

# --- non-finite weights ------------------------------------------------------------------------------------
add("nan-weight", "NaN in one layer's weights (a warning names the tensor; no metric printed)",
    weights(lambda h, d: fx.safetensors_bytes(h, fx.set_float(h, d, L0Q, 5, float("nan")))), 1,
    "error: the model's outputs are not finite (NaN/Inf) for 12 of 12 examples, so no metric is reported; check the checkpoint's weights (the load warning names non-finite tensors) and config.json",
    warning="$SCRATCH/model/model.safetensors: non-finite weights (NaN/Inf) in "
            "encoder.layer.0.attention.self.query.weight (1 of 1024); outputs and metrics will be meaningless")
add("inf-embedding", "Inf in the word embedding of [CLS] (a warning names the tensor; no metric printed)",
    weights(lambda h, d: fx.safetensors_bytes(h, fx.set_float(h, d, WORD, 2 * 32, float("inf")))), 1,
    "error: the model's outputs are not finite (NaN/Inf) for 12 of 12 examples, so no metric is reported; check the checkpoint's weights (the load warning names non-finite tensors) and config.json",
    warning="$SCRATCH/model/model.safetensors: non-finite weights (NaN/Inf) in embeddings.word_embeddings.weight "
            "(1 of 3136); outputs and metrics will be meaningless")

# --- config.json -------------------------------------------------------------------------------------------
add("cfg-hidden-zero", "hidden_size 0", config(hidden_size=0), 1,
    "error: $SCRATCH/model/config.json: hidden_size = 0 is outside 1..65536; fix config.json")
add("cfg-heads-negative", "num_attention_heads -4", config(num_attention_heads=-4), 1,
    "error: $SCRATCH/model/config.json: num_attention_heads = -4 is outside 1..4096; fix config.json")
add("cfg-not-divisible", "hidden_size not divisible by num_attention_heads", config(num_attention_heads=5), 1,
    "error: $SCRATCH/model/config.json: hidden_size 32 is not divisible by num_attention_heads 5; fix config.json")
add("cfg-hidden-no-head-dim", "classifier_hidden_size beside a narrower hidden_size (hidden channels removed) without "
    "head_dim", config(classifier_hidden_size=64), 1,
    "error: $SCRATCH/model/config.json: classifier_hidden_size 64 differs from hidden_size 32 (hidden channels "
    "removed) but head_dim is missing; add head_dim (the unpruned model's hidden_size / num_attention_heads)")
add("cfg-head-dim-zero", "head_dim 0", config(head_dim=0), 1,
    "error: $SCRATCH/model/config.json: head_dim = 0 is outside 1..65536; fix config.json")
add("cfg-hidden-huge", "hidden_size 10^9 (refused before allocating)", config(hidden_size=10**9), 1,
    "error: $SCRATCH/model/config.json: hidden_size = 1000000000 is outside 1..65536; fix config.json")
add("cfg-layers-huge", "num_hidden_layers 10^7", config(num_hidden_layers=10**7), 1,
    "error: $SCRATCH/model/config.json: num_hidden_layers = 10000000 is outside 1..1000; fix config.json")
add("cfg-vocab-huge", "vocab_size 10^12 (beyond 32 bits)", config(vocab_size=10**12), 1,
    "error: $SCRATCH/model/config.json: vocab_size = 1000000000000 is outside 1..10000000; fix config.json")
add("cfg-eps-negative", "layer_norm_eps -1", config(layer_norm_eps=-1), 1,
    "error: $SCRATCH/model/config.json: layer_norm_eps = -1 is outside (0, 1); fix config.json")
add("cfg-dropout-range", "hidden_dropout_prob 1.5", config(hidden_dropout_prob=1.5), 1,
    "error: $SCRATCH/model/config.json: hidden_dropout_prob = 1.5 is outside [0, 1); fix config.json")
add("cfg-classifier-dropout-negative", "classifier_dropout -0.1 (was taken for null: hidden_dropout_prob)",
    config(classifier_dropout=-0.1), 1, "error: $SCRATCH/model/config.json: classifier_dropout = -0.1 is outside "
    "[0, 1); fix config.json (null: use hidden_dropout_prob)")
add("cfg-fractional", "intermediate_size 37.5", config(intermediate_size=37.5), 1,
    "error: $SCRATCH/model/config.json: intermediate_size = 37.5 is not an integer; fix config.json")
add("cfg-pad-id", "pad_token_id not below vocab_size", config(pad_token_id=98), 1,
    "error: $SCRATCH/model/config.json: pad_token_id 98 is not below vocab_size 98; fix config.json")
add("cfg-positions-too-few", "max_position_embeddings 2: no room for [CLS] a [SEP]",
    config(max_position_embeddings=2), 1,
    "error: $SCRATCH/model/config.json: max_position_embeddings = 2 leaves 2 usable positions, fewer than the "
    "shortest input's 3 ([CLS] a [SEP]); set it to at least 3 in config.json (bert-base has 512)")
add("cfg-model-type", "a model_type headprune has no architecture row for (DeBERTa)", config(model_type="deberta-v2"), 1,
    "error: $SCRATCH/model/config.json: model_type 'deberta-v2' is not supported; headprune loads bert, roberta, xlm-roberta, distilbert, electra encoders")
add("cfg-arch-mismatch", "BERT weights under a config.json that says ELECTRA", config(model_type="electra"), 1,
    "error: $SCRATCH/model/model.safetensors: no embeddings.word_embeddings.weight under any known prefix (electra., none, 0.auto_model.); config.json's model_type is 'electra' (ELECTRA): do the weights and config.json belong together?")
add("cfg-wrong-type", "num_hidden_layers as a string", config(num_hidden_layers="two"), 1,
    "error: $SCRATCH/model/config.json: num_hidden_layers = \"two\" is not an integer; fix config.json")
add("cfg-unknown-activation", "hidden_act not supported", config(hidden_act="swish"), 1,
    "error: $SCRATCH/model/config.json: hidden_act 'swish' is not supported; use gelu, gelu_new (gelu_pytorch_tanh, gelu_fast) or relu")


def config_text(text):
    def build(s):
        m = fx.copy_tiny(s + "/model")
        with open(m + "/config.json", "w") as f:
            f.write(text)
        return model_eval(m)
    return build


add("cfg-not-json", "config.json that is not JSON", config_text("{\n  \"hidden_size\": 32,\n  oops\n}\n"), 1,
    "error: $SCRATCH/model/config.json: invalid JSON ([json.exception.parse_error.101] parse error at line 3, column 3: syntax error while parsing object key - invalid literal; last read: '32,<U+000A>  o'; expected string literal); re-save the model with save_pretrained")


def no_config(s):
    m = fx.copy_tiny(s + "/model")
    os.remove(m + "/config.json")
    return model_eval(m)


add("cfg-fuzz-model-type", "model_type 0, a number (found by fuzz_config_json: was a raw JSON type error)",
    config_text(open(os.path.join(fx.REPO, "tests/data/bad/fuzz/config_json-model_type_number.json")).read()), 1,
    "error: $SCRATCH/model/config.json: model_type = 0 has the wrong type; compare with HF BertConfig")
add("cfg-missing", "a model folder without config.json", no_config, 1,
    "error: $SCRATCH/model/config.json: cannot read config.json; point --model at a Hugging Face model folder")

# --- vocab.txt ---------------------------------------------------------------------------------------------
add("vocab-no-specials", "vocab.txt without [CLS], [SEP], [UNK]",
    vocab(lambda v: [t for t in v if t not in ("[CLS]", "[SEP]", "[UNK]")] + ["x1", "x2", "x3"]), 1,
    "error: $SCRATCH/model/vocab.txt: vocab has no [CLS] token (98 entries read); use a BERT vocab.txt that lists [PAD], [UNK], [CLS], [SEP]")
add("vocab-duplicate", "vocab.txt with a token twice (accepted as Hugging Face does, with a warning)",
    vocab(lambda v: v[:-1] + [v[10]]), 0, "",
    warning="$SCRATCH/model/vocab.txt: 1 token appears more than once (first '-' at lines 11 and 98); as in Hugging "
            "Face the later line's id is used and the earlier id is never produced")
add("vocab-larger", "vocab.txt with more tokens than vocab_size", vocab(lambda v: v + ["extra1", "extra2"]), 1,
    "error: $SCRATCH/model/vocab.txt: 100 tokens, more than config.json's vocab_size 98 (ids from 98 up have no embedding); use the vocab.txt that belongs to this model")
add("vocab-empty", "an empty vocab.txt", vocab(lambda v: []), 1,
    "error: $SCRATCH/model/vocab.txt: vocab has no [CLS] token (1 entries read); use a BERT vocab.txt that lists [PAD], [UNK], [CLS], [SEP]")


# --- vocab.json + merges.txt (RoBERTa), sentencepiece.bpe.model (XLM-R) -------------------------------------
def tokenizer_files(files):
    """The tiny model with its WordPiece files (vocab.txt, tokenizer_config.json) replaced by `files`."""
    def build(s):
        m = fx.copy_tiny(s + "/model")
        for name in ("vocab.txt", "tokenizer_config.json"):
            os.remove(os.path.join(m, name))
        for name, content in files.items():
            with open(os.path.join(m, name), "wb") as f:
                f.write(content if isinstance(content, bytes) else content.encode())
        return model_eval(m)
    return build


# A tiny RoBERTa vocab (ids below the tiny model's vocab_size 98) and its merges.
BPE_VOCAB = json.dumps({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4, "a": 5, "b": 6, "ab": 7})
BPE_MERGES = "#version: 0.2\na b\n"
add("bpe-vocab-not-json", "vocab.json that is not JSON", tokenizer_files({"vocab.json": BPE_VOCAB[:-1],
    "merges.txt": BPE_MERGES}), 1,
    "error: $SCRATCH/model/vocab.json: not valid JSON ([json.exception.parse_error.101] parse error at line 1, column 83: syntax error while parsing object - unexpected end of input; expected '}'); use the vocab.json saved with the model (tokenizer.save_pretrained)")
add("bpe-vocab-bad-id", "vocab.json with an id that is not an integer",
    tokenizer_files({"vocab.json": BPE_VOCAB.replace('"ab": 7', '"ab": "7"'), "merges.txt": BPE_MERGES}), 1,
    "error: $SCRATCH/model/vocab.json: token 'ab' has id \"7\", expected an integer in 0..9999999; use the vocab.json saved with the model (tokenizer.save_pretrained)")
add("bpe-merges-missing", "vocab.json without merges.txt", tokenizer_files({"vocab.json": BPE_VOCAB}), 1,
    "error: $SCRATCH/model/merges.txt: not found, and a byte-level BPE tokenizer (RoBERTa) needs both vocab.json and merges.txt; save the tokenizer into the folder with save_pretrained")
add("bpe-merge-one-piece", "a merges.txt line without two pieces",
    tokenizer_files({"vocab.json": BPE_VOCAB, "merges.txt": BPE_MERGES + "ab\n"}), 1,
    "error: $SCRATCH/model/merges.txt:3: expected two pieces separated by one space, got 'ab'; use the merges.txt saved with the model's vocab.json (tokenizer.save_pretrained)")
add("bpe-merge-unknown-piece", "a merge naming a piece that vocab.json lacks",
    tokenizer_files({"vocab.json": BPE_VOCAB, "merges.txt": BPE_MERGES + "b a\n"}), 1,
    "error: $SCRATCH/model/merges.txt:3: merge 'b a' names 'ba', which $SCRATCH/model/vocab.json lacks; use the merges.txt saved with the model's vocab.json (tokenizer.save_pretrained)")
add("bpe-merge-repeated", "the same merge twice (Hugging Face's two loaders rank it differently)",
    tokenizer_files({"vocab.json": BPE_VOCAB, "merges.txt": BPE_MERGES + "a b\n"}), 1,
    "error: $SCRATCH/model/merges.txt:3: merge 'a b' repeats line 2 (Hugging Face's two loaders would rank it differently); remove one of them")
add("bpe-no-specials", "vocab.json without <s>", tokenizer_files({"vocab.json": BPE_VOCAB.replace('"<s>": 0, ', ""),
    "merges.txt": BPE_MERGES}), 1,
    "error: $SCRATCH/model/vocab.json: vocab has no <s> token (7 entries read); use a RoBERTa vocab.json that lists <s>, <pad>, </s>, <unk>")
add("spm-not-a-model", "sentencepiece.bpe.model that is not a SentencePiece model",
    tokenizer_files({"sentencepiece.bpe.model": b"\x0a\x05hello not a model"}), 1,
    "error: $SCRATCH/model/sentencepiece.bpe.model: cannot load the SentencePiece model (the file is not a SentencePiece model protobuf); use the sentencepiece.bpe.model saved with the model (XLMRobertaTokenizer.save_pretrained)")
add("tok-none", "a model folder without tokenizer files", tokenizer_files({}), 1,
    "error: $SCRATCH/model: no tokenizer files (looked for vocab.txt, vocab.json + merges.txt, sentencepiece.bpe.model); save the model's tokenizer into the folder with save_pretrained")

# --- GLUE TSV ----------------------------------------------------------------------------------------------
HEAD = "sentence\tlabel\n"
add("tsv-bom", "TSV starting with a UTF-8 BOM (read as without it)",
    sst2(b"\xef\xbb\xbf" + (HEAD + fx.sst2_rows()).encode()), 0, "", same_result_as_clean)
add("tsv-crlf", "TSV with CRLF line ends (read as LF)",
    sst2((HEAD + fx.sst2_rows()).replace("\n", "\r\n")), 0, "", same_result_as_clean)
add("tsv-invalid-utf8", "TSV with bytes that are not UTF-8",
    sst2((HEAD + fx.sst2_rows(3)).encode() + b"caf\xe9 \xff\t1\n"), 1,
    "error: $SCRATCH/data/glue/SST-2/dev.tsv:5: byte 4 is not UTF-8; re-save the file as UTF-8")
add("tsv-wrong-columns", "a TSV row with a missing column", sst2(HEAD + fx.sst2_rows(3) + "no label here\n"), 1,
    "error: $SCRATCH/data/glue/SST-2/dev.tsv:5: expected 2 tab-separated columns (sentence, label), got 1; fix the file or pass the right --task")
add("tsv-unknown-label", "a TSV label outside the task's labels", sst2(HEAD + fx.sst2_rows(3) + "fine .\t7\n"), 1,
    "error: $SCRATCH/data/glue/SST-2/dev.tsv:5: label '7' is not one of {0, 1} for task sst2; fix the file or pass the right --task")
def files_eval(train, dev, *extra, verb=("eval",)):
    """prune eval (or the pruning run: verb ()) on a user's files: (name, text or bytes) of the training and the
    validation file."""
    def build(s):
        for name, text in (train, dev):
            with open(os.path.join(s, name), "wb") as f:
                f.write(text if isinstance(text, bytes) else text.encode())
        return [*verb, "--model", fx.copy_tiny(s + "/model"), "--train-file", s + "/" + train[0],
                "--validation-file", s + "/" + dev[0], "--max-seq-len", "32", "--out", s + "/runs", *extra]
    return build


DEV_CSV = ("dev.csv", "text,label\nok,1\n")
add("files-label-column", "data files without the label column", files_eval(
    ("train.csv", "review,sentiment\ngood film,positive\n"), ("dev.csv", "review,sentiment\nok,positive\n")), 1,
    "error: $SCRATCH/train.csv: data.label_column 'label' is not a column; the columns are [review, sentiment]; set "
    "data.label_column to the column of labels")
add("files-text-columns", "data.text_columns naming no column", files_eval(
    ("train.csv", "text,label\ngood,1\n"), DEV_CSV, "--set", "data.text_columns=[review]"), 1,
    "error: $SCRATCH/train.csv: data.text_columns names 'review', which is not a column; the columns are [text, "
    "label]; set data.text_columns to one or two of them")
add("files-ragged-row", "a CSV row with more fields than the header", files_eval(
    ("train.csv", "text,label\ngood,1\nbad,0,extra\n"), DEV_CSV), 1,
    'error: $SCRATCH/train.csv:3: 3 fields, the header has 2; quote a field that holds commas or line ends ("...")')
add("files-mixed-labels", "numbers and text in one label column", files_eval(
    ("train.csv", "text,label\ngood,1\nbad,negative\n"), DEV_CSV), 1,
    "error: $SCRATCH/train.csv:3: label 'negative' is text but earlier labels are numbers; give every row a number, "
    "or every row a text label")
add("files-dev-label", "a validation label absent from training", files_eval(
    ("train.csv", "text,label\ngood,positive\nbad,negative\n"), ("dev.csv", "text,label\nok,neutral\n")), 1,
    "error: $SCRATCH/dev.csv:2: label 'neutral' is not among the training labels [negative, positive]; fix the "
    "label, or train on a file that holds it")
add("files-json-line", "an invalid JSON line", files_eval(
    ("train.jsonl", '{"text": "good", "label": 1}\n{"text": "bad", "label": 0\n'), DEV_CSV), 1,
    "error: $SCRATCH/train.jsonl:2: not valid JSON (byte 27); write one JSON object per line (JSON lines)")
add("files-empty", "an empty training file", files_eval(("train.csv", ""), DEV_CSV), 1,
    "error: $SCRATCH/train.csv:1: empty file; give a file with a header row and data rows")
add("files-not-utf8", "a training file that is not UTF-8", files_eval(
    ("train.csv", b"text,label\ngo\xffod,1\n"), DEV_CSV), 1,
    "error: $SCRATCH/train.csv:2: byte 3 is not UTF-8; re-save the file as UTF-8")
add("files-model-labels", "the pruning run of a 3-label classifier on files of 2 labels", files_eval(
    ("train.csv", "text,label\ngood,positive\nbad,negative\n"), ("dev.csv", "text,label\nok,positive\n"),
    "--target-heads", "4", "--set", "prune.select_examples=0", verb=()), 2,
    "error: $SCRATCH/model/model.safetensors: classifier.weight has 3 labels, the task needs 2; use a model "
    "fine-tuned for these labels, or (prune) set prune.new_classifier: true to train a new classifier on its encoder")
add("files-metric", "data.metric that the labels do not have", files_eval(
    ("train.csv", "text,label\ngood,positive\nbad,negative\n"), ("dev.csv", "text,label\nok,positive\n"),
    "--set", "data.metric=spearman"), 2,
    "error: data.metric = spearman: classes in $SCRATCH/train.csv are measured by accuracy, f1, mcc; choose one of "
    "them")
TAGS_TRAIN = ("train.conll", "dogs NOUN\nrun VERB\n\ncats NOUN\n")
add("files-tag-unseen", "a tagger's validation tag absent from training", files_eval(
    TAGS_TRAIN, ("dev.conll", "cats ADJ\n")), 1,
    "error: $SCRATCH/dev.conll:1: tag 'ADJ' of word 'cats' is not among the 2 tags of the training file (NOUN, VERB); "
    "add sentences with it to the training file, or fix the tag")
add("files-tag-count", "JSON lines with more tokens than tags", files_eval(
    ("train.jsonl", '{"tokens": ["a", "b"], "ner_tags": ["O"]}\n'), TAGS_TRAIN), 1,
    "error: $SCRATCH/train.jsonl:1: 2 tokens but 1 ner_tags; give every token exactly one tag")
add("files-task-type", "data.task_type naming no task type", files_eval(
    TAGS_TRAIN, TAGS_TRAIN, "--set", "data.task_type=ner"), 2,
    "error: data.task_type = ner: use sequence_classification or token_classification (empty: from the training file)")
add("files-tagger-sequence-model", "a sequence classifier evaluated on a tagger's files", files_eval(
    TAGS_TRAIN, TAGS_TRAIN), 1,
    "error: $SCRATCH/model/model.safetensors: classifier.weight is a BertForSequenceClassification's classifier and "
    "the task needs a BertForTokenClassification; use a model fine-tuned as BertForTokenClassification, or (prune) "
    "set prune.new_classifier: true to train a new classifier on its encoder")
add("files-tagger-attattr", "the pruning run of a tagger with the attattr criterion", files_eval(
    TAGS_TRAIN, TAGS_TRAIN, "--target-heads", "4", "--criteria", "attattr", verb=()), 2,
    "error: prune.criteria attattr (attention attribution explains one class of a sequence) is not available for "
    "token classification (data.task_type); remove it from the config")
add("tsv-empty", "an empty TSV file (0 bytes)", sst2(""), 1,
    "error: $SCRATCH/data/glue/SST-2/dev.tsv:1: empty file, expected a header row; fix the file")
add("tsv-header-only", "a TSV with only its header", sst2(HEAD), 1,
    "error: $SCRATCH/data/glue/SST-2/dev.tsv: no examples (only a header); restore the split's rows, or choose another --split")
add("tsv-no-labels", "a split without labels (SST-2 test)", lambda s: ["eval", "--model", fx.two_label_tiny(s + "/m"),
    "--task", "sst2", "--split", "test", "--max-seq-len", "32"], 1,
    "error: sst2 split 'test' has no labels, so there is nothing to score; use --split dev, or `prune infer` for predictions on unlabelled text")


def stsb(scores):
    def build(s):
        root = fx.task_root(s, "STS-B", "dev.tsv", fx.stsb_rows(scores))
        return ["eval", "--model", fx.copy_tiny(s + "/model", source=fx.TINY_REG), "--task", "stsb",
                "--max-seq-len", "32", "--data-root", root, "--out", s + "/out"]  # a result of its own
    return build


add("stsb-out-of-range", "an STS-B score outside 0-5", stsb(["1.0", "4.5", "7.5"]), 1,
    "error: $SCRATCH/data/glue/STS-B/dev.tsv:4: score 7.5 is outside 0 to 5, the scale of stsb; fix the file or pass the right --task")
add("stsb-not-number", "an STS-B score that is not a number", stsb(["1.0", "high"]), 1,
    "error: $SCRATCH/data/glue/STS-B/dev.tsv:3: score 'high' is not a number for regression task stsb; fix the file or pass the right --task")
add("stsb-one-pair", "prune eval of STS-B on one pair: the correlations are undefined, said with the reason instead "
    "of nan in the result (was exit 0 with null metrics)", stsb(["2.5"]), 1,
    "error: prune eval: pearson and spearman on stsb dev are undefined: its 1 gold score is one value, and a "
    "correlation needs at least two distinct values of each; evaluate more examples (eval.max_examples = 0, 0 = "
    "the whole split)")
add("stsb-constant-gold", "prune eval of STS-B whose gold scores are all one value", stsb(["3.0", "3.0", "3.0"]), 1,
    "error: prune eval: pearson and spearman on stsb dev are undefined: its 3 gold scores are all one value, and a "
    "correlation needs at least two distinct values of each; evaluate more examples (eval.max_examples = 0, 0 = "
    "the whole split)")

# --- YAML config and --set ---------------------------------------------------------------------------------
add("yaml-typo", "a misspelt key in the YAML config", yaml_config(YAML_HEAD + "eval:\n  bach_size: 4\n"), 2,
    "error: $SCRATCH/run.yaml:7:3: unknown key 'eval.bach_size'; did you mean 'eval.batch_size'?")
add("yaml-wrong-type", "a value of the wrong type", yaml_config(YAML_HEAD + "eval:\n  batch_size: eight\n"), 2,
    "error: $SCRATCH/run.yaml:7:15: eval.batch_size: expected an integer, got 'eight'")
add("yaml-syntax", "YAML that does not parse", yaml_config(YAML_HEAD + "eval:\n  batch_size: [4\n"), 2,
    "error: $SCRATCH/run.yaml:8:1: invalid YAML: end of sequence flow not found")
add("yaml-mapping-in-list", "a mapping where a list element belongs (found by fuzz_yaml)",
    yaml_config(YAML_HEAD + "prune:\n  criteria: [confidence, {lrp: x}]\n"), 2,
    "error: $SCRATCH/run.yaml:7:26: prune.criteria[1] must be a single value, not a mapping; "
    "write it as `key: value` or `key: [a, b]`")
add("yaml-list-as-key", "a list where a key belongs", yaml_config(YAML_HEAD + "prune:\n  [a, b]: 1\n"), 2,
    "error: $SCRATCH/run.yaml:7:3: a key of section 'prune' must be a single value, not a list; "
    "write it as `key: value` or `key: [a, b]`")
add("yaml-unknown-section", "an unknown top-level section", yaml_config(YAML_HEAD + "evaluation:\n  x: 1\n"), 2,
    "error: $SCRATCH/run.yaml:7:3: unknown key 'evaluation.x'; see `prune config --doc` for the valid keys")
add("yaml-missing", "a config file that does not exist", plain("eval", "--config", "/nonexistent.yaml"), 2,
    "error: /nonexistent.yaml: cannot open config file; check the path passed to --config")
add("yaml-duplicate-key", "a key given twice in one section (yaml-cpp keeps both; the later won silently)",
    yaml_config(YAML_HEAD + "eval:\n  batch_size: 4\n  batch_size: 8\n"), 2, "error: $SCRATCH/run.yaml:8:3: key 'eval.batch_size' is given twice (lines 7 and 8); keep one of them")
add("yaml-duplicate-section", "a section given twice (its keys were merged silently)",
    yaml_config(YAML_HEAD + "data:\n  max_seq_len: 16\n"), 2, "error: $SCRATCH/run.yaml:6:1: section 'data' is given twice (lines 3 and 6); merge the two into one section")
add("yaml-section-scalar", "a section given a value (`eval: 3`; the hint named gates.beta)",
    yaml_config(YAML_HEAD + "eval: 3\n"), 2, "error: $SCRATCH/run.yaml:6:1: 'eval' is a section and holds keys, not a value: write `eval:` and below it, indented, keys such as `split: \"dev\"` (`prune config --doc` lists them)")
add("set-section", "--set naming a section (`--set eval=3`; the hint named gates.beta)",
    eval_with("--set", "eval=3"), 2, "error: --set: 'eval' is a section and holds keys, not a value: set one of them, e.g. --set eval.split=\"dev\" (`prune config --doc` lists them)")
add("set-typo", "--set with a misspelt key", eval_with("--set", "eval.bach_size=2"), 2,
    "error: --set: unknown key 'eval.bach_size'; did you mean 'eval.batch_size'?")
add("set-wrong-type", "--set with a value of the wrong type", eval_with("--set", "eval.batch_size=x"), 2,
    "error: --set: eval.batch_size: expected an integer, got 'x'")
add("set-no-equals", "--set without '='", eval_with("--set", "eval.batch_size"), 2,
    "error: --set eval.batch_size: expected key=value, e.g. --set eval.batch_size=32")

# --- numbers and flags -------------------------------------------------------------------------------------
add("threads-huge", "--threads 100000", eval_with("--threads", "100000"), 2,
    "error: run.threads = 100000; use 0 (all cores) or 1..$MAX_THREADS (4 per core of this machine)")
add("precision-unknown", "--precision fp16 (headprune has fp32, bf16 and int8)", eval_with("--precision", "fp16"), 2,
    "error: run.precision = 'fp16'; use fp32, bf16 or int8")
add("device-unknown", "--device gpu (run.device takes cpu, cuda or cuda:N; #62)", eval_with("--device", "gpu"), 2,
    "error: run.device = 'gpu'; use cpu, cuda (the first GPU) or cuda:N")
add("calibrate-negative", "--calibrate -1", eval_with("--precision", "int8", "--calibrate", "-1"), 2,
    "error: run.calibrate = -1; use 0 (dynamic int8, no calibration) or N examples of the train split, e.g. 512")
add("calibrate-no-train", "int8 eval (calibrated by default) where the data root has no train split",
    sst2("sentence\tlabel\n" + fx.sst2_rows(), "dev.tsv", "--precision", "int8"), 1,
    "error: $SCRATCH/data/glue/SST-2/train.tsv: file not found (task sst2, split train, data root '$SCRATCH/data'); "
    "pass --data-root DIR or set HEADPRUNE_DATA=DIR, where DIR holds glue/ and mnli_subset_textfooler/ (int8 "
    "calibration reads 512 examples of sst2's train split; pass --calibrate 0 for dynamic int8 without it)")
add("max-shard-negative", "export.max_shard_mb = -1 (sharded exports, #62)",
    lambda s: ["export", "--model", fx.copy_tiny(s + "/model"), "--to", s + "/out", "--set", "export.max_shard_mb=-1"],
    2, "error: export.max_shard_mb = -1; use 0 (one model.safetensors) or a shard size in MB such as 5000 "
    "(transformers' default 5GB)")
add("export-dtype", "export.dtype misspelt (16-bit exports, #62)",
    lambda s: ["export", "--model", fx.copy_tiny(s + "/model"), "--to", s + "/out", "--set", "export.dtype=float16"],
    2, "error: export.dtype = 'float16'; use fp32, bf16 or fp16")
add("export-dtype-onnx", "export.dtype = bf16 with --onnx",
    lambda s: ["export", "--model", fx.copy_tiny(s + "/model"), "--to", s + "/out", "--set", "export.dtype=bf16",
               "--onnx"],
    2, "error: export.dtype = bf16 with --onnx/--int8: the ONNX files are written and checked from fp32 weights; "
    "export at fp32 for them (or leave out --onnx/--int8)")
add("bench-compare-precision", "bench.compare_precision misspelt",
    lambda s: ["bench", "--model", fx.copy_tiny(s + "/model"), "--set", "bench.compare_precision=int4"], 2,
    "error: bench.compare_precision = 'int4'; use fp32, bf16, int8 or leave it empty")
add("max-examples-wraps", "--max-examples 2^32 + 1", eval_with("--max-examples", "4294967297"), 2,
    "error: --max-examples: eval.max_examples: 4294967297 is outside the 32-bit range of this setting; use at most 2147483647")
add("seed-out-of-range", "a seed beyond 64 bits", eval_with("--set", "run.seed=-9223372036854775809"), 2,
    "error: --set: run.seed: expected an integer, got '-9223372036854775809'")
add("batch-zero", "--batch 0", eval_with("--batch", "0"), 2,
    "error: eval.batch_size = 0; use a positive batch size")
add("seq-len-beyond-positions", "--max-seq-len beyond max_position_embeddings",
    lambda s: ["eval", "--model", fx.copy_tiny(s + "/model"), "--task", "mnli_subset", "--max-seq-len", "128",
               "--data-root", fx.glue_root(s), "--set", "run.out_dir=" + s + "/runs"], 2,
    "error: data.max_seq_len = 128 exceeds the model's max_position_embeddings 64; use --max-seq-len 64 or less")

# --- head masks --------------------------------------------------------------------------------------------
add("mask-layer-range", "a mask naming layer 9 of 2", eval_with("--mask", "9:0"), 2,
    "error: --mask: '9:0': layer 9 is out of range; the model has 2 layers (0..1)")
add("mask-head-range", "a mask naming head 7 of 4", eval_with("--mask", "0:7"), 2,
    "error: --mask: '0:7': head 7 is out of range; the model has 4 heads (0..3)")
add("mask-malformed", "a mask that is not LAYER:HEAD", eval_with("--mask", "a:b"), 2,
    "error: --mask: 'a:b': layer 'a' is not a number; write layer:head,head;… e.g. \"2:0,3;5:11\"")
add("mask-neuron-range", "a mask naming FFN neuron 37 of 37", eval_with("--mask", "f0:37"), 2,
    "error: --mask: 'f0:37': neuron 37 is out of range; the model has 37 neurons (0..36)")

add("mask-index-huge", "a head index past 32 bits (was called \"not a number\")", eval_with("--mask", "1:99999999999"),
    2, "error: --mask: '1:99999999999': head 99999999999 is out of range; the model has 4 heads (0..3)")
add("mask-layers-all", "a \"layers:\" group removing every layer", eval_with("--mask", "layers:0-1"), 2,
    "error: --mask: the \"layers:\" group removes all 2 layers; keep at least one")
add("mask-group-empty", "a group naming no heads (`--mask '0:'` meant no mask, silently)", eval_with("--mask", "0:"),
    2, "error: --mask: '0:' names no heads after the ':'; write 2:0,3, or leave the group out to keep the whole layer")


def empty_mask_file(s):
    with open(s + "/mask.txt", "w") as f:
        f.write("# nothing pruned\n")
    return eval_with("--mask", s + "/mask.txt")(s)


add("mask-file-empty", "a mask file naming nothing (accepted: what a gates run keeping every head writes; said)",
    empty_mask_file, 0, "", warning="$SCRATCH/mask.txt: the mask file names no heads or neurons (empty, or only comments), so every head and neuron is kept")


def no_classifier_tiny(s):
    """The tiny model without its classifier: a bare encoder, as a sentence-transformers folder's."""
    dst = fx.copy_tiny(s + "/bare")
    fx.edit_weights(dst, lambda h, d: fx.rebuild(h, d, drop=("classifier.weight", "classifier.bias")))
    return dst


def budget_run(*flags):
    return lambda s: ["--model", fx.copy_tiny(s + "/model"), "--task", "mnli_subset", "--max-seq-len", "32",
                      "--data-root", fx.glue_root(s), *flags, "--out", s + "/run"]


add("budget-two-targets", "--target-heads and --target-flops together", budget_run("--target-heads", "3",
    "--target-flops", "0.5"), 2,
    "error: prune.target_heads and a FLOPs, parameter or latency budget are both set; give --target-heads N or "
    "--target-flops F",
    not_created("run"))
add("distill-tasks-single-texts", "prune.distill_tasks naming a one-text task for a pair task's distillation: refused "
    "before anything is written, not pairs made of single sentences (#58)",
    lambda s: ["--model", fx.copy_tiny(s + "/model"), "--task", "mrpc", "--max-seq-len", "32", "--target-flops",
               "0.5", "--set", "prune.distill_tasks=[sst2]", "--out", s + "/run"], 2,
    "error: prune.distill_tasks has sst2, whose rows are single texts, and mrpc's are pairs; name pair tasks "
    "(e.g. stsb, rte), or remove it", not_created("run"))
add("layers-count", "--target-layers as many as the model has (nothing would be dropped)",
    budget_run("--target-layers", "2"), 2,
    "error: prune.target_layers = 2 but the model has 2 layers; use 1..1 (or 0 for off)", not_created("run"))
add("layers-with-max-drop", "--target-layers with --max-drop (was \"prune.a FLOPs, parameter or latency budget\")",
    budget_run("--target-layers", "1", "--max-drop", "1"), 2,
    "error: prune.target_layers and prune.max_drop are both set; give --target-layers N alone (it drops whole layers, "
    "then recovers)", not_created("run"))
add("layers-one-layer-model", "--target-layers on a one-layer model (was \"use 1..0\")",
    lambda s: (budget_run("--target-layers", "1")(s), fx.copy_tiny(s + "/model", config={"num_hidden_layers": 1}))[0],
    2,
    "error: prune.target_layers = 1 but the model has 1 layer, and a model keeps at least one: there is no layer to "
    "drop; prune heads or neurons instead (--target-heads N or --target-flops F)", not_created("run"))
add("layer-counts-unused-range", "prune.layer_counts out of range without layers in prune.structures (was found in "
    "stage 4, after the run folder was claimed)", budget_run("--target-flops", "0.5", "--set", "prune.layer_counts=[9]"),
    2, "error: prune.layer_counts has 9; use layer counts in 1..2 (the model's layers), or [] for every count",
    not_created("run"))
add("late-config-error-new-run", "a config error found after the run folder was claimed (stage 4: a FLOPs budget too "
    "small for one head); the new run's folder was left, and the corrected command refused it as another config",
    budget_run("--target-flops", "0.001", "--set", "prune.rank_split=matched", "--set", "prune.eval_split=mismatched",
               "--rank-examples", "8", "--schedule", "0,50", "--set", "prune.criteria=[random]", "--set",
               "prune.bootstrap=0", "--set", "prune.latency=false", "--set", "prune.curve_recover_steps=0"), 2,
    "error: the budget pays for no head (one head costs 32032.000000, the budget is 379.392000); raise the target",
    not_created("run"))
add("layers-choice", "--layer-choice naming no known choice", budget_run("--target-layers", "1", "--layer-choice",
    "middle"), 2, "error: prune.layer_choice = 'middle'; use fisher, top or alternate", not_created("run"))
add("hidden-width", "prune.hidden_widths naming more channels than the model has", budget_run(
    "--target-flops", "0.5", "--structures", "heads,neurons,hidden", "--set", "prune.hidden_widths=[24,9999]"), 2,
    "error: prune.hidden_widths has 9999; use channel counts in 1..32 (the model's hidden_size), or [] for 32 down "
    "to 8 in steps of 1",
    not_created("run"))
add("layer-count", "prune.layer_counts naming more layers than the model has", budget_run(
    "--target-flops", "0.5", "--structures", "heads,neurons,layers", "--set", "prune.layer_counts=[3]"), 2,
    "error: prune.layer_counts has 3; use layer counts in 1..2 (the model's layers), or [] for every count",
    not_created("run"))
add("layers-with-budget", "--target-layers with a FLOPs budget", budget_run("--target-layers", "1", "--target-flops",
    "0.5"), 2, "error: prune.target_layers and a FLOPs, parameter or latency budget are both set; give "
    "--target-layers N alone (it drops whole layers, then recovers)", not_created("run"))
def foreign_folder(s):
    """--out names a folder holding a file of no run, beside a latency table put there to be reused."""
    os.makedirs(s + "/run", exist_ok=True)
    for name in ("notes.txt", "latency_table.json"):
        with open(s + "/run/" + name, "w") as f:
            f.write("{}\n")
    return budget_run("--target-flops", "0.5", "--set", "prune.rank_split=matched", "--set",
                      "prune.eval_split=mismatched")(s)


add("run-folder-foreign", "--out holding files of no run (a latency table alone would be reused)", foreign_folder, 2,
    "error: $SCRATCH/run is not empty and holds no pruning run (no state/config.yaml); pass --out NEW_DIR")
add("budget-range", "--target-flops 1.5", budget_run("--target-flops", "1.5"), 2,
    "error: prune.target_flops = 1.5; use a fraction of the unpruned encoder's in (0, 1), e.g. 0.5 (0 = off)",
    not_created("run"))

# --- the command line --------------------------------------------------------------------------------------
add("unknown-command", "a misspelt command", plain("evl", "--model", "$TINY"), 2,
    "error: unknown command 'evl'; did you mean 'eval'? (prune --help lists the commands)")
add("unknown-option", "an option the command does not have", plain("eval", "--model", "$TINY", "--bogus"), 2,
    "error: The following argument was not expected: --bogus; see `prune eval --help`")
add("unknown-task", "an unknown task", plain("eval", "--model", "$TINY", "--task", "sst3"), 2,
    "error: data.task: unknown task 'sst3'; use one of sst2, cola, mrpc, rte, stsb, wnli, qnli, qqp, mnli, mnli_subset")
add("labels-mismatch", "a 3-label model on a 2-label task",
    plain("eval", "--model", "$TINY", "--task", "sst2", "--max-seq-len", "64"), 1,
    "error: tests/data/golden/tiny_bert/model.safetensors: classifier.weight has 3 labels, the task needs 2; use a "
    "model fine-tuned for these labels, or (prune) set prune.new_classifier: true to train a new classifier on its "
    "encoder")
add("infer-input-missing", "prune infer --input naming a missing file",
    plain("infer", "--model", "$TINY", "--input", "/nonexistent.txt"), 1,
    "error: /nonexistent.txt: cannot read the --input file; give a text file with one example per line")
add("infer-input-folder", "prune infer --input naming a folder (was \"all lines empty\")",
    lambda s: ["infer", "--model", fx.TINY, "--input", s], 1, "error: $SCRATCH: is a folder; --input takes a text file with one example per line")


def infer_input(content, *extra):
    def build(s):
        with open(s + "/in.txt", "wb") as f:
            f.write(content)
        return ["infer", "--model", fx.TINY, "--max-seq-len", "32", "--input", s + "/in.txt", *extra]
    return build


add("infer-invalid-utf8", "prune infer --input with bytes that are not UTF-8 (refused, as the GLUE reader does)",
    lambda s: infer_input(b"a fine film\nbad \xff byte\n", "--output", s + "/out.json")(s), 1, "error: $SCRATCH/in.txt:2: byte 5 is not UTF-8; re-save the file as UTF-8",
    not_created("out.json"))
add("infer-output-extension", "prune infer --output x.csv (HDF5 was written into it)",
    lambda s: infer_input(b"a fine film\n", "--output", s + "/x.csv")(s), 2, "error: --output $SCRATCH/x.csv: infer writes HDF5 (.h5, .hdf5) or JSON (.json), and '.csv' is neither; name the file with one of these extensions", not_created("x.csv"))


def embed_input(modules=None, pooling_dim=32, *extra):
    """prune embed on a one-line input with the tiny model made a sentence-transformers folder (modules: the
    modules.json text; None: the tiny model as it is, no modules.json)."""
    def build(s):
        model = fx.copy_tiny(s + "/model")
        if modules is not None:
            with open(model + "/modules.json", "w") as f:
                f.write(modules)
            os.makedirs(model + "/1_Pooling", exist_ok=True)
            with open(model + "/1_Pooling/config.json", "w") as f:
                json.dump({"word_embedding_dimension": pooling_dim, "pooling_mode_mean_tokens": True}, f)
        with open(s + "/in.txt", "w") as f:
            f.write("a fine film\n")
        return ["embed", "--model", model, "--input", s + "/in.txt", *extra]
    return build


def sts_prune(*flags):
    """`prune --config configs/sts_embed.yaml` with `flags` on the tiny model made a sentence-transformers folder."""
    return lambda s: ["--config", os.path.join(fx.REPO, "configs/sts_embed.yaml"), "--model",
                      embed_input(ST_MODULES, 32)(s)[2], *[f.replace("$SCRATCH", s) for f in flags], "--out",
                      s + "/run"]


ST_MODULES = ('[{"path": "", "type": "sentence_transformers.models.Transformer"}, '
              '{"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]')
add("embed-not-sentence-model", "prune embed on a model folder without modules.json (#59)",
    lambda s: embed_input(None, 32, "--output", s + "/e.npy")(s), 1,
    "error: $SCRATCH/model: no modules.json, so not a sentence-transformers folder; prune embed reads one such as "
    "checkpoints/all-MiniLM-L6-v2 (Transformer, Pooling, Normalize)", not_created("e.npy"))
add("embed-dense-module", "prune embed on a sentence-transformers folder with a Dense module, which it does not compute",
    lambda s: embed_input(ST_MODULES[:-1] + ', {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}]', 32,
                          "--output", s + "/e.npy")(s), 1,
    "error: $SCRATCH/model/modules.json: module 2 is Dense; headprune computes Transformer -> Pooling [-> Normalize], "
    "as all-MiniLM-L6-v2 holds them", not_created("e.npy"))
add("embed-pooling-width", "prune embed where the Pooling module was made for another hidden size",
    lambda s: embed_input(ST_MODULES, 16, "--output", s + "/e.npy")(s), 1,
    "error: $SCRATCH/model: the Pooling module's word_embedding_dimension is 16 but the encoder's hidden size is 32; "
    "the two belong together (re-export the folder)", not_created("e.npy"))
def st_eval(task_folder, split_file, rows, task):
    """prune eval --task TASK on the tiny encoder (its classifier dropped) made a sentence-transformers folder."""
    def build(s):
        model = embed_input(ST_MODULES, 32)(s)[2]
        fx.edit_weights(model, lambda h, d: fx.rebuild(h, d, drop=("classifier.weight", "classifier.bias")))
        root = fx.task_root(s, task_folder, split_file, rows)
        return ["eval", "--model", model, "--task", task, "--data-root", root, "--output", s + "/r.json"]
    return build


add("eval-embeddings-task", "prune eval of a sentence-transformers model without a classifier on a task other than "
    "STS-B: no fresh classifier scored at chance, one line naming the fix (#59)",
    st_eval("SST-2", "dev.tsv", "sentence\tlabel\n" + fx.sst2_rows(), "sst2"), 2,
    "error: $SCRATCH/model is a sentence-transformers model with no classifier for sst2: prune eval scores its "
    "embeddings on stsb (cosine Spearman, as MTEB does); use --task stsb, or fine-tune a classifier for sst2 first "
    "(prune train --config configs/sst2.yaml)", not_created("r.json"))
add("embedding-distill-task", "prune.distill_tasks naming no task: refused before anything is written (#59)",
    sts_prune("--target-flops", "0.5", "--set", "prune.distill_tasks=[sst3]"), 2,
    "error: prune.distill_tasks has 'sst3', no task; use some of sst2, cola, mrpc, rte, stsb, wnli, qnli, qqp, mnli, "
    "mnli_subset", not_created("run"))
add("embedding-distill-hidden", "a negative prune.distill_hidden: refused before anything is written, not a recovery "
    "that pushes the layers away from the teacher's (#59)",
    sts_prune("--target-flops", "0.5", "--set", "prune.distill_hidden=-1"), 2,
    "error: prune.distill_hidden = -1; it weighs the layer-wise term of the recovery: 0 (off) or a positive number, "
    "e.g. 1", not_created("run"))
add("embedding-distill-augment", "gates.distill_augment with prune.objective: embedding, whose recovery has no "
    "task distillation to swap words in: refused before anything is written, not ignored",
    sts_prune("--target-flops", "0.5", "--set", "gates.distill_augment=0.4"), 2,
    "error: prune.objective = embedding: gates.distill_augment = 0.4 swaps words in a task's distillation; the "
    "embeddings' recovery distils the unpruned model's embeddings of unlabelled sentences (add more with "
    "prune.distill_tasks): set it to 0", not_created("run"))
add("embedding-objective-folder", "prune.objective: embedding on a plain Hugging Face folder (no modules.json): "
    "refused before anything is written, not pruned as a classifier",
    lambda s: ["--config", os.path.join(fx.REPO, "configs/sts_embed.yaml"), "--model", fx.TINY, "--target-flops",
               "0.5", "--out", s + "/run"], 2,
    "error: prune.objective = embedding: tests/data/golden/tiny_bert has no modules.json, so it is no "
    "sentence-transformers folder; point model.path at one (checkpoints/all-MiniLM-L6-v2), or use prune.objective: "
    "task for a classifier", not_created("run"))
add("embedding-frontier-with-target", "--max-drop with --target-flops on the embedding task: the frontier chooses the "
    "budget itself (#59)",
    sts_prune("--max-drop", "1", "--target-flops", "0.5"), 2,
    "error: prune.objective = embedding: --max-drop chooses the budget itself (prune.budget_schedule); pass it or "
    "--target-flops F, not both", not_created("run"))
add("embedding-frontier-models", "prune.frontier_models on the embedding task: not measured there, refused (#59)",
    sts_prune("--max-drop", "1", "--set", "prune.frontier_models=[$SCRATCH]"), 2,
    "error: prune.objective = embedding: prune.frontier_models is not measured for embeddings (the frontier measures "
    "the search at prune.budget_schedule); leave it []", not_created("run"))
add("embedding-gates-without-budget", "--method gates on the embedding task without --target-flops: the gates train to "
    "a FLOPs budget (#59)",
    sts_prune("--method", "gates", "--target-params", "0.5"),
    2, "error: prune.objective = embedding: --method gates trains to a FLOPs budget: pass --target-flops F (--max-drop "
    "measures the search's budgets; --target-params is not built for the gates on embeddings)", not_created("run"))
add("embedding-layer-gates", "gates.layer_gates on the embedding task: the gates would remove whole layers, which an "
    "embedding's export keeps; refused before anything is written, not trained",
    sts_prune("--method", "gates", "--target-flops", "0.5", "--set", "gates.layer_gates=true"),
    2, "error: prune.objective = embedding: gates.layer_gates and gates.hidden_gates remove whole layers and hidden "
    "channels, which an embedding keeps (its export has every layer and the hidden width): set both false",
    not_created("run"))
add("embedding-heads-with-budget", "--target-heads with --target-flops on the embedding task: one target or the "
    "other (#59)",
    sts_prune("--target-heads", "4", "--target-flops", "0.5"),
    2, "error: prune.objective = embedding: --target-heads N keeps N heads by a criterion; pass it alone, not with "
    "--max-drop, --target-flops or --target-params", not_created("run"))
add("embedding-gates-criterion", "prune.criteria naming gates on the embedding task: that criterion reads a "
    "classifier's gated run (#59)",
    sts_prune("--target-heads", "4", "--set", "prune.criteria=[taylor,gates]"),
    2, "error: prune.objective = embedding: prune.criteria has gates, which reads a classifier's gated run; leave it "
    "out (--method gates --target-flops F trains the gates for embeddings)", not_created("run"))
add("embedding-taylor-token-level", "prune.taylor_token_level on the embedding task: a classifier's loss per token "
    "(#59)",
    sts_prune("--target-heads", "4", "--set", "prune.taylor_token_level=true"),
    2, "error: prune.objective = embedding: prune.taylor_token_level is a classifier's loss per token; an embedding's "
    "Taylor reads the whole embedding's derivative: set it false", not_created("run"))
add("embedding-heads-seeds", "prune.seeds 3 with --target-heads on the embedding task: one ranking, not silently one "
    "seed of three (#59)",
    sts_prune("--target-heads", "4", "--set", "prune.seeds=3"),
    2, "error: prune.objective = embedding: --target-heads ranks the heads once, with one seed, on the training "
    "sentences the run distils: leave prune.seeds 1, prune.iterative false and prune.rank_split train",
    not_created("run"))
add("embed-output-is-input", "prune embed --output naming the --input file (was: the sentences replaced by the "
    "embeddings)", lambda s: embed_input(ST_MODULES, 32, "--output", s + "/in.txt")(s), 2,
    "error: --output $SCRATCH/in.txt is the --input file: writing the embeddings would replace the sentences; pass "
    "another --output, e.g. $SCRATCH/in.txt.embeddings.h5", lambda s: None if open(s + "/in.txt").read() ==
    "a fine film\n" else "in.txt was changed")


def unknown_pooling_mode(s):
    cmd = embed_input(ST_MODULES, 32, "--output", s + "/e.npy")(s)
    with open(s + "/model/1_Pooling/config.json", "w") as f:
        json.dump({"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True,
                   "pooling_mode_median_tokens": True}, f)
    return cmd


add("embed-pooling-unknown-mode", "a Pooling config with a pooling_mode_* key sentence-transformers does not know "
    "(was ignored: the embeddings left that mode out, where sentence-transformers refuses the folder)",
    unknown_pooling_mode, 1,
    "error: $SCRATCH/model/1_Pooling/config.json: unknown pooling mode \"pooling_mode_median_tokens\"; "
    "sentence-transformers refuses the folder too; its modes are pooling_mode_mean_tokens, pooling_mode_cls_token, "
    "pooling_mode_max_tokens, pooling_mode_mean_sqrt_len_tokens, pooling_mode_weightedmean_tokens and "
    "pooling_mode_lasttoken", not_created("e.npy"))
def missing_default_prompt(s):
    cmd = embed_input(ST_MODULES, 32, "--output", s + "/e.npy")(s)
    with open(s + "/model/config_sentence_transformers.json", "w") as f:
        json.dump({"prompts": {"query": "query: "}, "default_prompt_name": "passage"}, f)
    return cmd


add("embed-default-prompt-missing", "config_sentence_transformers.json whose default_prompt_name names no prompt "
    "(sentence-transformers refuses the folder)", missing_default_prompt, 1,
    "error: $SCRATCH/model/config_sentence_transformers.json: \"default_prompt_name\" is 'passage', which \"prompts\" "
    "does not hold; sentence-transformers refuses the folder too; name one of its prompts, or set it to null",
    not_created("e.npy"))
add("embed-output-extension", "prune embed --output e.csv",
    lambda s: embed_input(ST_MODULES, 32, "--output", s + "/e.csv")(s), 2,
    "error: --output $SCRATCH/e.csv: embed writes HDF5 (.h5, .hdf5), NumPy (.npy) or JSON lines (.jsonl), and '.csv' "
    "is none of these; name the file with one of these extensions", not_created("e.csv"))
add("bench-seq-positions", "prune bench --seq beyond max_position_embeddings (was blamed on --max-seq-len)",
    plain("bench", "--model", "$TINY", "--seq", "100", "--batches", "1"), 2, "error: bench.seq = 100 exceeds the max_position_embeddings 64 of tests/data/golden/tiny_bert; use --seq 64 or less")
add("model-missing", "a model folder that does not exist", plain("eval", "--model", "/nonexistent", "--task", "sst2"),
    1, "error: /nonexistent: model folder not found; pass --model DIR with config.json and model.safetensors (run "
    "scripts/setup.sh to link the real model under checkpoints/)")
add("data-root-missing", "a data root that does not exist",
    plain("eval", "--model", "$TINY", "--task", "sst2", "--data-root", "/nonexistent"), 1,
    "error: --data-root /nonexistent: no glue/ or mnli_subset_textfooler/ inside; pass --data-root DIR or set HEADPRUNE_DATA=DIR, where DIR holds glue/<TASK>/*.tsv as written by GLUE's download_glue_data.py (and optionally mnli_subset_textfooler/)")

# --- output ------------------------------------------------------------------------------------------------


def no_tmp_left(folder):
    def check(s):
        d = os.path.join(s, folder)
        left = [f for f in os.listdir(d) if ".tmp" in f] if os.path.isdir(d) else []
        return f"left behind: {left}" if left else None
    return check


add("out-dev-null", "--output /dev/null (a device is never replaced)", eval_with("--output", "/dev/null"), 1,
    "error: /dev/null: is a device, and results are written only to regular files; name a file path",
    lambda s: None if os.path.exists("/dev/null") and not os.path.isfile("/dev/null") else "/dev/null was replaced")


def out_folder(s):
    os.makedirs(s + "/taken")
    return model_eval(fx.copy_tiny(s + "/model"), "--output", s + "/taken")


add("out-is-folder", "--output naming an existing folder", out_folder, 1,
    "error: $SCRATCH/taken: is a folder, and results are written only to regular files; name a file path", no_tmp_left("."))
add("out-missing-folder", "--output in a folder that does not exist (created, as mkdir -p)",
    lambda s: model_eval(fx.copy_tiny(s + "/model"), "--output", s + "/no/such/dir/r.json"), 0, "",
    lambda s: None if os.path.isfile(s + "/no/such/dir/r.json") else "r.json was not written")


def read_only_out(s):
    return model_eval(fx.copy_tiny(s + "/model"), "--output", s + "/ro/result.json")


add("out-read-only", "--output in a read-only folder", read_only_out, 1,
    "error: $SCRATCH/ro/result.json: cannot create its folder $SCRATCH/ro (Read-only file system); choose a writable location",
    no_tmp_left("ro"), env=lambda s: {"HP_FAIL_OP": "open", "HP_FAIL_PREFIX": s + "/ro"})

add("out-read-only-file", "--output in an existing folder on a read-only file system (was \"free disk space\")",
    lambda s: (os.makedirs(s + "/ro"), read_only_out(s))[1], 1,
    "error: $SCRATCH/ro/result.json: cannot create $SCRATCH/ro/result.json.tmp (Read-only file system); the file "
    "system is read-only: choose a folder on a writable disk",
    no_tmp_left("ro"), env=lambda s: {"HP_FAIL_OP": "open", "HP_FAIL_PREFIX": s + "/ro/"})


def disk_full(s):
    """An earlier result in out/, then the same command on a full disk."""
    args = model_eval(fx.copy_tiny(s + "/model"), "--output", s + "/out/result.json")
    first = subprocess.run([PRUNE, *args], capture_output=True, text=True)
    if first.returncode != 0:
        raise RuntimeError("the first run failed: " + first.stderr[-300:])
    shutil.copy(s + "/out/result.json", s + "/earlier.json")
    return args


def earlier_intact(s):
    left = no_tmp_left("out")(s)
    if left:
        return left
    same = open(s + "/out/result.json", "rb").read() == open(s + "/earlier.json", "rb").read()
    return None if same else "the earlier result.json changed"


add("out-disk-full", "a full disk while writing (write fails with ENOSPC)", disk_full, 1,
    "error: $SCRATCH/out/result.json: cannot write $SCRATCH/out/result.json.tmp (No space left on device); free disk space or choose a writable folder",
    earlier_intact, env=lambda s: {"HP_FAIL_OP": "write", "HP_FAIL_PREFIX": s + "/out"})


def over_pruning_run(s):
    os.makedirs(s + "/run/state")
    with open(s + "/run/state/config.yaml", "w") as f:
        f.write("model:\n  path: elsewhere\n")
    return ["train", "--model", fx.copy_tiny(s + "/model"), "--task", "mnli_subset", "--max-seq-len", "32",
            "--data-root", fx.glue_root(s), "--max-steps", "2", "--out", s + "/run"]


add("train-over-pruning-run", "prune train --out naming a pruning run's folder", over_pruning_run, 2,
    "error: $SCRATCH/run holds a pruning run, not a training run; pass --out NEW_DIR",
    lambda s: None if sorted(os.listdir(s + "/run")) == ["state"] else f"wrote {sorted(os.listdir(s + '/run'))}")

def earlier_eval(s, *extra):
    """An earlier `prune eval` result in out/result.json; then an eval of another config into it."""
    m = fx.copy_tiny(s + "/model")
    first = subprocess.run([PRUNE, *model_eval(m, "--output", s + "/out/result.json")], capture_output=True, text=True)
    if first.returncode != 0:
        raise RuntimeError("the first eval failed: " + first.stderr[-300:])
    shutil.copy(s + "/out/result.json", s + "/earlier.json")
    return model_eval(m, "--output", s + "/out/result.json", *extra)


def result_unchanged(s):
    same = open(s + "/out/result.json", "rb").read() == open(s + "/earlier.json", "rb").read()
    return None if same else "the earlier result was replaced"


def foreign_result(s):
    os.makedirs(s + "/out")
    with open(s + "/out/result.json", "w") as f:
        f.write("{\"mine\": 1}\n")
    shutil.copy(s + "/out/result.json", s + "/earlier.json")
    return model_eval(fx.copy_tiny(s + "/model"), "--output", s + "/out/result.json")


add("eval-over-other-result", "prune eval --output naming an earlier result of another config (was overwritten)",
    lambda s: earlier_eval(s, "--batch", "3"), 2, "error: $SCRATCH/out/result.json holds a result of another config (it differs at '  batch_size: 3  # evaluation batch size (batches are sorted by length, padded per batch)'); pass --output NEW_FILE, or delete $SCRATCH/out/result.json to replace it", result_unchanged)
add("eval-over-foreign-file", "prune eval --output naming a file that is no eval result (was overwritten)",
    foreign_result, 2, "error: $SCRATCH/out/result.json exists and holds no result of this command (no 'config'); pass --output NEW_FILE, or delete it", result_unchanged)

def tiny_train(s, out):
    return ["train", "--model", fx.copy_tiny(s + "/model"), "--task", "mnli_subset", "--max-seq-len", "32",
            "--data-root", fx.glue_root(s), "--set", "train.train_split=matched", "--set",
            "train.eval_split=mismatched", "--max-steps", "2", "--out", out]


add("train-bf16-capped", "train.precision = bf16 under HEADPRUNE_MAX_ISA=avx2 (oneDNN capped below AVX-512 refused "
    "LibTorch's bf16 matmuls mid-run)", lambda s: tiny_train(s, s + "/run") + ["--set", "train.precision=bf16"], 2,
    "error: train.precision = bf16 on the CPU needs AVX-512 (oneDNN's bf16 products: native with AVX512_BF16 or AMX, "
    "emulated on AVX-512), and HEADPRUNE_MAX_ISA=avx2 allows none; train at fp32 (train.precision: fp32, "
    "or auto, which measures the faster)", None, env=lambda s: {"HEADPRUNE_MAX_ISA": "avx2"})


def nothing_under(relative):
    """The refused run left no folder (and nothing in it) where it was pointed."""
    return lambda s: f"left {relative}: {os.listdir(os.path.join(s, relative))}" \
        if os.path.exists(os.path.join(s, relative)) else None


def gated_train(*flags):
    return lambda s: tiny_train(s, s + "/run")[:-2] + [*flags, "--out", s + "/run"]


add("train-target-flops-range", "prune train --target-flops 1.5 (a fraction to keep)", gated_train("--target-flops", "1.5"),
    2, "error: gates.target_flops = 1.5; use a fraction of the encoder to keep in (0, 1), e.g. 0.5, or 0 (off)",
    nothing_under("run"))
add("train-warmup-ratio-range", "prune train --target-heads with gates.target_warmup_ratio 2 (the refused run left "
    "its folder with config.resolved.yaml)", gated_train("--target-heads", "3", "--set", "gates.target_warmup_ratio=2"),
    2, "error: gates.target_warmup_ratio = 2, must be in [0, 1]; use e.g. 0.5", nothing_under("run"))
add("train-distill-augment-range", "prune train distilling with gates.distill_augment 2 (a word's swap probability)",
    gated_train("--target-heads", "3", "--set", "gates.distill=true", "--set", "gates.distill_augment=2"), 2,
    "error: gates.distill_augment = 2; it is the probability a word of an augmented row is swapped: 0 (off) or in "
    "(0, 1], e.g. 0.4", nothing_under("run"))
add("train-two-targets", "prune train --target-heads and --target-flops together",
    gated_train("--target-heads", "3", "--target-flops", "0.5"), 2,
    "error: more than one of gates.target_heads, target_flops and target_params is set; give one target",
    nothing_under("run"))
add("train-neuron-group", "gates.neuron_group that does not divide the FFN width (37 in the tiny model)",
    gated_train("--target-flops", "0.5", "--set", "gates.neuron_group=4"), 2,
    "error: gates.neuron_group = 4, must divide the FFN width 37; use 1 (a gate per neuron) or a divisor such as 8 or 64")
def export_slim_with_mask(s):
    """A model slimmed by a first export --mask (heads 1 and 3 of layer 0), exported with a mask again."""
    first = subprocess.run([PRUNE, "export", "--model", fx.copy_tiny(s + "/model"), "--mask", "0:1,3", "--to",
                            s + "/model_slim"], capture_output=True, text=True)
    if first.returncode != 0:
        raise RuntimeError("the first export failed: " + first.stderr[-300:])
    return ["export", "--model", s + "/model_slim", "--mask", "1:0", "--to", s + "/out"]


add("export-mask-slimmed", "prune export --mask on a model that is slimmed already", export_slim_with_mask, 2,
    "error: export.mask on $SCRATCH/model_slim, which is slimmed already (pruned_heads or intermediate_sizes in its "
    "config.json); pass the unpruned model the mask was made for", nothing_under("out"))
# --- prune export writes its folder whole or not at all (#44, #46) -----------------------------------------
EARLIER = {}  # scratch folder -> the bytes of its earlier export, by relative path


def files_of(folder):
    out = {}
    for root, _, files in os.walk(folder):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                out[os.path.relpath(os.path.join(root, name), folder)] = f.read()
    return out


def earlier_export(s):
    """A first export of the tiny model in $SCRATCH/out, its bytes kept to compare with afterwards."""
    first = subprocess.run([PRUNE, "export", "--model", fx.TINY, "--to", s + "/out"], capture_output=True, text=True)
    if first.returncode != 0:
        raise RuntimeError("the first export failed: " + first.stderr[-300:])
    EARLIER[s] = files_of(s + "/out")


def out_as_before(s):
    return None if files_of(s + "/out") == EARLIER.pop(s) else "the earlier export in out/ was changed"


def reference_python():
    """The reference Python as headprune finds it (core/base/process.h python_reference)."""
    if os.environ.get("HP_PYTHON"):
        return os.environ["HP_PYTHON"]
    cache = os.environ.get("HEADPRUNE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "headprune")
    return os.path.join(cache, "venv", "bin", "python")


def needs_onnxruntime():
    py = reference_python()
    if not os.path.exists(py):
        return f"no reference Python at {py} (scripts/setup_python.sh)"
    if subprocess.run([py, "-c", "import onnxruntime, onnx, h5py"], capture_output=True).returncode != 0:
        return f"onnxruntime, onnx or h5py is missing in {py}"
    return None


def stand_in_python(s, text, interpreter=None):
    """$SCRATCH/python: a stand-in for the reference Python ($HP_PYTHON) running `text`."""
    with open(s + "/python", "w") as f:
        f.write(f"#!{interpreter or sys.executable}\n{text}")
    os.chmod(s + "/python", 0o755)


def foreign_out(s):
    os.makedirs(s + "/out")
    for name, text in (("notes.txt", "mine\n"), ("config.json", "{}\n")):
        with open(os.path.join(s, "out", name), "w") as f:
            f.write(text)
    EARLIER[s] = files_of(s + "/out")
    return ["export", "--model", fx.TINY, "--to", s + "/out"]


def onnx_differs(s):
    """An earlier export in out/; then an --onnx export into it whose check reports ONNX Runtime 0.5 away."""
    earlier_export(s)
    stand_in_python(s, "import json, sys\na = sys.argv\nopen(a[2] + '/model.onnx', 'w').write('half')\n"
                       "json.dump({'max_abs_diff': 0.5, 'tol': 1e-4, 'examples': 4}, open(a[a.index('--result') + 1], 'w'))\n"
                       "sys.exit(1)\n")
    return ["export", "--model", fx.TINY, "--onnx", "--to", s + "/out"]


def int8_differs(s):
    """An earlier export in out/; then an --int8 export into it: the real tools/onnx_export.py, ONNX Runtime's
    int8 logits negated afterwards (every prediction differs from headprune's)."""
    earlier_export(s)
    stand_in_python(s, "import runpy, sys\nsys.argv = sys.argv[1:]\ncode = 0\ntry:\n"
                       "    runpy.run_path(sys.argv[0], run_name='__main__')\nexcept SystemExit as e:\n"
                       "    code = e.code or 0\nif code == 0 and '--int8' in sys.argv:\n    import h5py\n"
                       "    with h5py.File(sys.argv[sys.argv.index('--logits-out') + 1], 'r+') as f:\n"
                       "        f['logits'][...] = -f['logits'][()]\nsys.exit(code)\n", reference_python())
    return ["export", "--model", fx.TINY, "--int8", "--task", "mnli_subset", "--max-seq-len", "32", "--data-root",
            fx.glue_root(s), "--to", s + "/out"]


def int8_read_only(s):
    return ["export", "--model", fx.TINY, "--int8", "--task", "mnli_subset", "--data-root", fx.glue_root(s), "--to",
            s + "/ro/int8"]


add("export-over-foreign", "prune export --to a folder holding files of no export (they were overwritten, others kept)",
    foreign_out, 2, "error: $SCRATCH/out is not empty and holds no headprune export (it has 'notes.txt', which an "
    "export would replace); pass --to NEW_DIR, empty the folder, or add --force to replace it", out_as_before)
def hf_folder(s, name="hf"):
    """A Hugging Face model folder of the user's (the tiny model, no headprune config.json keys) with their own
    README.md: every file name one an export also writes."""
    fx.copy_tiny(os.path.join(s, name))
    with open(os.path.join(s, name, "README.md"), "w") as f:
        f.write("# my model\n")
    EARLIER[s] = files_of(os.path.join(s, name))
    return os.path.join(s, name)


def unchanged(relative):
    return lambda s: None if files_of(os.path.join(s, relative)) == EARLIER.pop(s) else f"{relative} was changed"


add("export-over-hf-folder", "prune export --to a Hugging Face model folder that is no export, with its own README.md "
    "(every name one an export writes: it was replaced whole)",
    lambda s: ["export", "--model", fx.TINY, "--to", hf_folder(s)], 2,
    "error: $SCRATCH/hf is not empty and holds no headprune export (its config.json was not written by headprune: no "
    "'heads_per_layer'), which an export would replace whole; pass --to NEW_DIR, empty the folder, or add --force to "
    "replace it", unchanged("hf"))
add("export-force-holds-model", "prune export --force --to a folder that holds --model (it deleted the input)",
    lambda s: ["export", "--model", hf_folder(s, "work/model"), "--force", "--to", s + "/work"], 2,
    "error: $SCRATCH/work holds --model ($SCRATCH/work/model), which replacing the folder would delete; name a folder "
    "outside it", unchanged("work/model"))
add("export-force-cwd", "prune export --force --to . (the current folder; was a staging folder's name and \"check the "
    "folder is writable\")",
    lambda s: (hf_folder(s, "work"), ["export", "--model", fx.TINY, "--force", "--to", "."])[1], 2,
    "error: . is the current folder, which a folder written whole cannot replace; name a new folder, e.g. export, or "
    "run from another folder", unchanged("work"), cwd="work")

add("export-read-only", "prune export --int8 --to a folder in a read-only folder (was a raw filesystem error)",
    int8_read_only, 1, "error: $SCRATCH/ro/int8: cannot create a folder in $SCRATCH/ro (Read-only file system); "
    "choose a writable location", nothing_under("ro"), env=lambda s: {"HP_FAIL_OP": "open", "HP_FAIL_PREFIX": s + "/ro"})
add("export-disk-full", "a full disk while an export over an earlier one is written (the message names the target)",
    lambda s: (earlier_export(s), ["export", "--model", fx.TINY, "--to", s + "/out"])[1], 1,
    "error: $SCRATCH/out/model.safetensors: cannot write $SCRATCH/out/model.safetensors.tmp (No space left on "
    "device); free disk space or choose a writable folder", out_as_before,
    env=lambda s: {"HP_FAIL_OP": "write", "HP_FAIL_PREFIX": s + "/."})
add("export-onnx-differs", "prune export --onnx whose ONNX Runtime check fails, over an earlier export (kept whole)",
    onnx_differs, 1, "error: $SCRATCH/out/model.onnx: ONNX Runtime's logits differ from headprune's by up to 0.5 "
    "(tolerance 1e-4) on 4 × 32 random ids; export without --onnx and --int8 (the Hugging Face folder alone), and "
    "report it with the model's config.json", out_as_before, env=lambda s: {"HP_PYTHON": s + "/python"})
add("export-int8-differs", "prune export --int8 whose check against headprune's int8 fails, over an earlier export "
    "(the half-written folder was left; skipped without the reference Python)", int8_differs, 1,
    "error: $SCRATCH/out/model.int8.onnx: ONNX Runtime's int8 differs from headprune's int8 (weights ±63) on 12 "
    "examples of mnli_subset: 0% the same predictions (need 99.5%), max |logit difference| 3.16 > tolerance 0.159 (10% of "
    "the largest |float32 logit|); export without --int8 (model.onnx alone), or compare headprune's int8 on your data "
    "with `prune eval --precision int8 --calibrate 0`", out_as_before, env=lambda s: {"HP_PYTHON": s + "/python"},
    needs=needs_onnxruntime)

add("frontier-with-target", "--max-drop with a budget of its own (--target-heads N)",
    budget_run("--max-drop", "1", "--target-heads", "4"), 2,
    "error: prune.max_drop and prune.target_heads are both set: --max-drop D measures every budget and picks the "
    "fastest within D; give --max-drop D alone, or drop it for a budget of your own",
    not_created("run"))
add("frontier-bad-drop", "--max-drop outside [0, 100)", budget_run("--max-drop", "100"), 2,
    "error: prune.max_drop = 100; use the points of the metric the exported model may lose against the unpruned fp32 "
    "model, e.g. 1 (0 = off)",
    not_created("run"))
add("frontier-bad-time", "prune.frontier_time outside (0, 60]", budget_run("--max-drop", "1", "--set",
    "prune.frontier_time=0"), 2,
    "error: prune.frontier_time = 0; use seconds in (0, 60], e.g. 0.3",
    not_created("run"))
add("frontier-bad-refine", "prune.frontier_refine outside 0..5", budget_run("--max-drop", "1", "--set",
    "prune.frontier_refine=-1"), 2,
    "error: prune.frontier_refine = -1; use 0 (the schedule alone) to 5 rounds, e.g. 1",
    not_created("run"))
add("frontier-method", "--max-drop with prune.method other than best", budget_run("--max-drop", "1", "--method",
    "taylor"), 2,
    "error: prune.method = taylor with prune.max_drop: the frontier measures the head criteria and the budget search "
    "itself; leave prune.method = best",
    not_created("run"))
add("frontier-precision", "prune.frontier_precisions naming no precision",
    budget_run("--max-drop", "1", "--set", "prune.frontier_precisions=[fp16]"), 2,
    "error: prune.frontier_precisions = 'fp16'; use fp32, bf16 or int8",
    not_created("run"))
add("frontier-precision-empty", "prune.frontier_precisions = [] (the run measured no candidate, then said \"raise "
    "--max-drop\")", budget_run("--max-drop", "1", "--set", "prune.frontier_precisions=[]"), 2,
    "error: prune.frontier_precisions is empty, so --max-drop would measure no candidate; use fp32, bf16 or int8, e.g. "
    "[fp32, int8]", not_created("run"))
add("frontier-precision-capped", "prune.frontier_precisions = [int8] under HEADPRUNE_MAX_ISA=scalar (no precision "
    "left that runs natively)", budget_run("--max-drop", "1", "--set", "prune.frontier_precisions=[int8]"), 2,
    "error: prune.frontier_precisions = [int8] has no precision this CPU runs natively (instruction-set cap scalar "
    "from HEADPRUNE_MAX_ISA), so --max-drop would measure no candidate; add fp32, e.g. [fp32, int8]",
    not_created("run"), env=lambda s: {"HEADPRUNE_MAX_ISA": "scalar"})
add("frontier-criteria", "prune.frontier_criteria naming no criterion",
    budget_run("--max-drop", "1", "--set", "prune.frontier_criteria=[tayler]"), 2,
    "error: prune.frontier_criteria: unknown criterion 'tayler' (did you mean taylor?); use one of confidence, lrp, "
    "taylor, attattr, random, loo, gates",
    not_created("run"))
add("layers-method", "--method gates with --target-layers (the method was ignored)",
    budget_run("--target-layers", "1", "--method", "gates"), 2,
    "error: prune.method = gates with --target-layers: whole layers are chosen by prune.layer_choice (fisher, top or "
    "alternate), not by a method; leave prune.method = best", not_created("run"))
add("unused-key-warned", "--structures heads,neurons,hidden with --target-heads (accepted, with one warning naming why)",
    budget_run("--target-heads", "6", "--structures", "heads,neurons,hidden", "--set", "prune.rank_split=matched",
               "--set", "prune.eval_split=mismatched", "--rank-examples", "8", "--schedule", "0,50", "--set",
               "prune.criteria=[random]", "--set", "prune.bootstrap=0", "--set", "prune.latency=false",
               "--recover-steps", "0", "--set", "prune.verify=false"), 0, "",
    warning="prune.structures is set but this run does not use it: only a FLOPs, parameter or latency budget or "
    "--max-drop D does", keeps_work=True)
add("frontier-gates", "prune.frontier_gates with a budget outside (0, 100) or auto beside a number",
    budget_run("--max-drop", "1", "--set", "prune.frontier_gates=[auto,50]"), 2,
    "error: prune.frontier_gates has 'auto'; use FLOPs percents in (0, 100), e.g. [30, 50], or [auto] (alone), or [] "
    "for no gates",
    not_created("run"))

SELECT = ("--set", "prune.eval_split=mismatched", "--set", "prune.rank_split=matched")
add("select-is-eval", "prune.select_split naming the evaluation split (choices on the reported split, #58)",
    budget_run("--max-drop", "1", *SELECT, "--set", "prune.select_split=mismatched"), 2,
    "error: prune.select_split = mismatched is prune.eval_split = mismatched: choices made on the split the run "
    "reports are optimistic by construction; leave prune.select_split empty (rows held out of train.train_split) or "
    "name another split",
    not_created("run"))
add("select-part-of-eval", "prune.select_split naming a slice of the evaluation split (choices would read what is "
    "reported)",
    budget_run("--max-drop", "1", *SELECT, "--set", "prune.select_split=mismatched[:10]"), 2,
    "error: prune.select_split = mismatched[:10] is part of prune.eval_split = mismatched: choices made on the split "
    "the run reports are optimistic by construction; leave prune.select_split empty (rows held out of "
    "train.train_split) or name another split",
    not_created("run"))


def unlabelled_test_run(s):
    """A user's CSV files whose test file has no label column, its test split named to choose on."""
    rows = {"train.csv": 40, "dev.csv": 12, "test.csv": 8}
    for name, n in rows.items():
        with open(os.path.join(s, name), "w", encoding="utf-8") as f:
            f.write("text,label\n" if name != "test.csv" else "text\n")
            for i in range(n):
                f.write(fx.WORDS_A[i % 4] + ("," + "abc"[i % 3] if name != "test.csv" else "") + "\n")
    return ["--model", fx.copy_tiny(s + "/model"), "--train-file", s + "/train.csv", "--validation-file",
            s + "/dev.csv", "--set", "data.test_file=" + s + "/test.csv", "--max-seq-len", "32", "--max-drop", "1",
            "--set", "prune.select_split=test", "--out", s + "/run"]


add("select-unlabelled", "prune.select_split naming a split without labels (nothing to score the choices on)",
    unlabelled_test_run, 2,
    "error: prune.select_split = test has no labels: the run's choices are scored on it; name a labelled split other "
    "than prune.eval_split, or leave it empty (rows held out of train.train_split)",
    not_created("run"))
add("select-bad-slice", "prune.select_split with a slice that is not row counts",
    budget_run("--max-drop", "1", *SELECT, "--set", "prune.select_split=matched[x:]"), 2,
    "error: prune.select_split = 'matched[x:]': 'x' is not a row count; write a slice of rows as NAME[begin:end], "
    "e.g. train[:-1000] or train[-1000:]",
    not_created("run"))
add("select-bad-holdout", "a split spec's [holdout:N] without a positive row count",
    budget_run("--max-drop", "1", *SELECT, "--set", "prune.select_split=matched[holdout:0]"), 2,
    "error: prune.select_split = 'matched[holdout:0]': write NAME[holdout:N] with N a positive row count, e.g. "
    "train[holdout:1000] (1000 whole rows held out) or train[rest:1000] (the rows left to train on)",
    not_created("run"))
add("select-holdout-twice", "train.train_split holding rows out already while the run holds out its own",
    budget_run("--max-drop", "1", *SELECT, "--set", "train.train_split=matched[rest:50]"), 2,
    "error: train.train_split = matched[rest:50] holds rows out already; name the held-out rows as "
    "prune.select_split, or set prune.select_examples = 0",
    not_created("run"))
add("select-negative", "prune.select_examples below 0",
    budget_run("--max-drop", "1", *SELECT, "--set", "prune.select_examples=-5"), 2,
    "error: prune.select_examples = -5; use a count of training rows to hold out for the run's choices, e.g. 1000 "
    "(0 = off)",
    not_created("run"))

add("frontier-models-not-a-model", "prune.frontier_models naming a folder that holds no model",
    lambda s: budget_run("--max-drop", "1", *SELECT, "--set", "prune.frontier_models=[" + s + "]")(s), 1,
    "error: prune.frontier_models[0] = $SCRATCH: no config.json there; name an exported model folder (a prune run's "
    "model/)",
    not_created("run"))
add("frontier-models-no-classifier", "prune.frontier_models naming a folder without a classifier",
    lambda s: budget_run("--max-drop", "1", *SELECT, "--set", "prune.frontier_models=[" + no_classifier_tiny(s) +
                         "]")(s), 1,
    "error: prune.frontier_models[0] = $SCRATCH/bare: has no classifier (a sentence-transformers folder or a bare "
    "encoder); name an export of a model fine-tuned for these labels (a prune run's model/)",
    not_created("run"))
add("frontier-models-other-labels", "prune.frontier_models naming a model of another label count",
    lambda s: budget_run("--max-drop", "1", *SELECT, "--set", "prune.frontier_models=[" +
                         fx.two_label_tiny(s + "/two") + "]")(s), 1,
    "error: prune.frontier_models[0] = $SCRATCH/two: its classifier has 2 labels, the task needs 3; name an export of "
    "a model fine-tuned for these labels (a prune run's model/)",
    not_created("run"))
add("recover-scale", "prune.recover_scale neither removed nor fixed",
    budget_run("--target-flops", "0.5", "--set", "prune.recover_scale=more"), 2,
    "error: prune.recover_scale = 'more'; use removed (budget points recover longer the more they removed) or fixed "
    "(prune.recover_steps at every budget)",
    not_created("run"))

add("budget-gates-latency", "--method gates with --target-latency (the gates learn FLOPs or parameters)",
    budget_run("--target-latency", "5", "--method", "gates"), 2,
    "error: prune.method = gates with --target-latency: the gates learn a FLOPs or parameter budget; give "
    "--target-flops F or --target-params F, or prune.method = kwon",
    not_created("run"))


add("train-refused-gates", "prune train with a bad gate setting (the folder it left refused the corrected run)",
    lambda s: tiny_train(s, s + "/runs/x") + ["--gates", "--set", "gates.beta=-1"], 2, "error: gates.beta = -1, must be in (0, 1]; Voita et al. use 0.33, Louizos et al. and CoFi 2/3", nothing_under("runs"))
add("train-refused-model", "prune train refused for a missing model (the lock's empty folder was left)",
    lambda s: ["train", "--model", s + "/nomodel", "--task", "mnli_subset", "--data-root", fx.glue_root(s),
               "--out", s + "/runs/y"], 1, "error: $SCRATCH/nomodel/config.json: cannot read config.json; point --model at a Hugging Face model folder", nothing_under("runs"))


# --- a disk that fills in the middle of an HDF5 file (every HDF5 writer: infer output, run.h5, model.h5) ----
def filled_after(prefix, after=4096):
    return lambda s: {"HP_FAIL_OP": "write", "HP_FAIL_PREFIX": os.path.join(s, prefix), "HP_FAIL_AFTER": str(after)}


def nothing_of(folder, name):
    """No .tmp left in folder and no file `name` (a partial file never takes the final name)."""
    def check(s):
        left = no_tmp_left(folder)(s)
        return left or (f"{name} was written" if os.path.exists(os.path.join(s, folder, name)) else None)
    return check


add("h5-full-infer", "a disk that fills in the middle of `prune infer --hidden` output (crashed: exit 139)",
    lambda s: infer_input(("a fine film\tand more words\n" * 200).encode(), "--hidden", "--output",
                          s + "/out/h.h5")(s), 1, "error: $SCRATCH/out/h.h5: cannot write $SCRATCH/out/h.h5.tmp (No space left on device); free disk space or choose a writable folder", nothing_of("out", "h.h5"), env=filled_after("out"))
add("h5-full-run", "a disk that fills in the middle of a training run's run.h5 (its checkpoints are kept for --resume)",
    lambda s: tiny_train(s, s + "/run"), 1, "error: $SCRATCH/run/run.h5: cannot write $SCRATCH/run/run.h5.tmp (No space left on device); free disk space or choose a writable folder", nothing_of("run", "run.h5"), env=filled_after("run/run.h5", 1024),
    keeps_work=True)
add("h5-full-model", "a disk that fills in the middle of a pruning run's model.h5 (its finished stages are kept for --resume)",
    budget_run("--target-heads", "3", "--method", "taylor", "--set", "train.train_split=matched", "--set",
               "train.eval_split=mismatched", "--set", "prune.rank_split=matched", "--set",
               "prune.eval_split=mismatched", "--rank-examples", "12", "--schedule", "0,50,100", "--set",
               "prune.latency=false", "--set", "prune.verify=false"), 1, "error: $SCRATCH/run/model/model.h5: cannot write $SCRATCH/run/model/model.h5.tmp (No space left on device); free disk space or choose a writable folder", nothing_of("run/model", "model.h5"),
    env=filled_after("run/.model.tmp-*/model.h5*"), keeps_work=True)
add("h5-full-analysis", "a disk that fills in the middle of `prune analyze`'s analysis.h5 (its finished pass is kept)",
    lambda s: ["analyze", "--model", fx.TINY, "--task", "mnli_subset", "--max-seq-len", "64", "--examples", "24",
               "--batch", "4", "--resamples", "20", "--data-root", fx.glue_root(s), "--out", s + "/an"], 1, "error: $SCRATCH/an/analysis.h5: cannot write $SCRATCH/an/analysis.h5.tmp (No space left on device); free disk space "
    "or choose a writable folder",
    nothing_of("an", "analysis.h5"), env=filled_after("an/analysis.h5"), keeps_work=True)
add("run-out-disk-full", "a pruning run whose --out is on a full disk (left an empty run folder)",
    budget_run("--target-heads", "3", "--method", "taylor", "--set", "prune.rank_split=matched", "--set",
               "prune.eval_split=mismatched", "--set", "train.train_split=matched"), 1, "error: $SCRATCH/run/state/config.yaml: cannot write $SCRATCH/run/state/config.yaml.tmp (No space left on "
    "device); free disk space or choose a writable folder",
    env=lambda s: {"HP_FAIL_OP": "write", "HP_FAIL_PREFIX": s + "/run"})


def python_without_torch(s):
    """$SCRATCH/python: a Python that runs but cannot import torch or h5py (the system one without its
    site-packages), as bin/python of a venv whose pip install has not finished."""
    with open(s + "/python", "w") as f:
        f.write('#!/bin/sh\nexec /usr/bin/python3 -S "$@"\n')
    os.chmod(s + "/python", 0o755)


def verified_run(s):
    """A small pruning run of the tiny model to its export and Hugging Face checks (stage 7)."""
    python_without_torch(s)
    return budget_run("--target-heads", "3", "--method", "taylor", "--criteria", "taylor", "--recover-steps", "0",
                      "--set", "train.train_split=matched", "--set", "train.eval_split=mismatched", "--set",
                      "prune.rank_split=matched", "--set", "prune.eval_split=mismatched", "--rank-examples", "12",
                      "--schedule", "0,50,100", "--set", "prune.latency=false")(s)


add("prune-hf5-broken", "a pruning run whose optional transformers 5 Python cannot import torch (a half-installed "
    "venv-v5 failed stage 7 of every run; skipped since)", verified_run, 0, "",
    warning="stage 7: the transformers 5 Python reference $SCRATCH/python cannot import what tools/hf_check.py "
    "needs (the line above names the module); skipping its Hugging Face check; rerun `scripts/setup.sh --v5`",
    env=lambda s: {"HP_PYTHON_V5": s + "/python"}, keeps_work=True)
add("prune-hf4-broken", "a pruning run whose transformers 4 reference Python cannot import torch (was: \"Hugging "
    "Face transformers does not reproduce the slimmed export\"; its finished stages are kept)", verified_run, 1,
    "error: stage 7: the Python reference $SCRATCH/python cannot import what tools/hf_check.py needs (the line "
    "above names the module); rerun scripts/setup.sh, or skip the Hugging Face checks with --set prune.verify=false",
    env=lambda s: {"HP_PYTHON": s + "/python"}, keeps_work=True)

OWNER = "pid 4242 on testhost, since 2026-01-01 00:00:00 UTC"
HOLDERS = {}  # scratch folder -> the process holding its run's lock


def busy_run(s):
    """A run folder whose lock another process holds (as a run in progress does)."""
    os.makedirs(s + "/run")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"f = open({s + '/run/run.lock'!r}, 'w'); fcntl.flock(f, fcntl.LOCK_EX); f.write({OWNER + chr(10)!r}); f.flush()\n"
        "print('locked', flush=True); time.sleep(120)")], stdout=subprocess.PIPE, text=True)
    holder.stdout.readline()
    HOLDERS[s] = holder
    return tiny_train(s, s + "/run")


def release(s):
    HOLDERS.pop(s).kill()
    return None if os.listdir(s + "/run") == ["run.lock"] else f"wrote {os.listdir(s + '/run')}"


def stale_lock(s):
    """The lock file a killed run leaves: its owner line, and no process holding it."""
    os.makedirs(s + "/run")
    with open(s + "/run/run.lock", "w") as f:
        f.write(OWNER + "\n")
    return tiny_train(s, s + "/run")


def lock_released(s):
    return "run.lock is still there after the run" if os.path.exists(s + "/run/run.lock") else None


add("run-busy", "two runs at once on one run folder (the second refuses)", busy_run, 2,
    f"error: $SCRATCH/run is in use by another run ({OWNER}); wait for it to finish, or pass --out NEW_DIR", release)
add("run-stale-lock", "the lock file of a killed run (taken over)", stale_lock, 0, "", lock_released,
    warning=f"$SCRATCH/run: taking over the lock left by a run that stopped without finishing ({OWNER})")

# --- running the table -------------------------------------------------------------------------------------
PRUNE = None
FAIL_IO = None
SCRATCH_ROOT = os.path.join(os.environ.get("TMPDIR", "/tmp"), "hp_errors")


def snapshot(folder):
    """Every file and folder under `folder`, relative to it."""
    out = set()
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            out.add(os.path.relpath(os.path.join(root, name), folder))
    return out


def run_entry(e):
    """(exit code, the error line with the scratch folder as $SCRATCH, complaint from `after` or None)."""
    s = os.path.join(SCRATCH_ROOT, e["id"])
    shutil.rmtree(s, ignore_errors=True)
    os.makedirs(s)
    args = e["build"](s)
    before = snapshot(s)
    env = dict(os.environ)
    if e["env"]:
        env.update(e["env"](s))
        env["LD_PRELOAD"] = FAIL_IO
    got = subprocess.run([PRUNE, *args], capture_output=True, text=True, env=env, timeout=120,
                         cwd=os.path.join(s, e["cwd"]) if e["cwd"] else None)
    lines = [l for l in (got.stdout + got.stderr).splitlines() if l.startswith("error: ")]
    line = lines[0].replace(s, "$SCRATCH").replace(fx.REPO + "/", "") if lines else ""
    # The thread limit depends on the machine: written as $MAX_THREADS (4 per core).
    line = line.replace(f"1..{4 * (os.cpu_count() or 1)} (4 per core", "1..$MAX_THREADS (4 per core")
    warnings = [l.split("] ", 1)[-1].replace(s, "$SCRATCH") for l in (got.stdout + got.stderr).splitlines()
                if " warning [" in l]
    complaint = e["after"](s) if e["after"] else None
    left = sorted(snapshot(s) - before)
    if e["code"] != 0 and left and not e["keeps_work"]:  # a refused command leaves nothing new, folders included
        complaint = (complaint or "") + f" a refused command left {left[:5]}"
    if e["warning"] and e["warning"] not in warnings:
        complaint = (complaint or "") + f" no warning {e['warning']!r} among {warnings}"
    if got.returncode != e["code"] and e["code"] == 0:
        complaint = (complaint or "") + " output: " + (got.stdout + got.stderr)[-600:]
    return got.returncode, line, complaint, got.stdout + got.stderr


def check(e):
    code, line, complaint, output = run_entry(e)
    problems = []
    if code != e["code"]:
        problems.append(f"exit code {code}, expected {e['code']}")
    if line != e["line"]:
        problems.append(f"error line\n  got:      {line!r}\n  expected: {e['line']!r}")
    if code >= 128 or code < 0:
        problems.append("crashed")
    if len([l for l in output.splitlines() if l.startswith("error: ")]) > 1:
        problems.append("more than one error line")
    if complaint:
        problems.append(complaint)
    return problems


def doc():
    out = ["# Bad inputs and what headprune says",
           "",
           "Every row is a test (`tests/errors/catalogue.py`, one CTest test `errors.<id>` each): the input is",
           "built in a scratch folder (`$SCRATCH`), `prune` runs on it, and the test checks the exit code, that",
           "this exact line is the only `error:` line, and where a row says so, what must not happen (a file",
           "written or replaced, a command executed, an earlier result damaged). A refused command (exit 1 or 2)",
           "must leave nothing new under the scratch folder, folders included (a run that fails after finishing",
           "some of its work keeps that work for `--resume`, where its row says so). Exit codes: 0 success, 1 bad",
           "input data or files (model, data, output), 2 bad usage or configuration (flags, YAML, `--set`).",
           "This file is generated: `python3 tests/errors/catalogue.py --write-doc`.",
           "",
           "| id | input | exit | error line |",
           "|---|---|---|---|"]
    def cell(text):
        """| escaped, and a < that markdown would read as an HTML tag (<s>, </s>, <TASK>)."""
        return re.sub(r"<(?=[A-Za-z/])", "&lt;", text).replace("|", "&#124;")

    for e in E:
        line = cell(e["line"] or "(none: accepted)")
        if e["warning"]:
            line += "<br>warning: " + cell(e["warning"])
        out.append(f"| `{e['id']}` | {cell(e['what'])} | {e['code']} | {line} |")
    return "\n".join(out) + "\n"


def main():
    global PRUNE, FAIL_IO
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prune", default=os.path.join(fx.REPO, "build", "bin", "prune"))
    ap.add_argument("--fail-io", default=os.path.join(fx.REPO, "build", "tests", "libhp_fail_io.so"))
    ap.add_argument("--entry")
    ap.add_argument("--show", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--write-doc", action="store_true")
    ap.add_argument("--check-doc", action="store_true")
    a = ap.parse_args()
    PRUNE, FAIL_IO = os.path.abspath(a.prune), os.path.abspath(a.fail_io)
    doc_path = os.path.join(fx.REPO, "docs", "errors.md")
    if a.list:
        print(";".join(e["id"] for e in E))
    elif a.write_doc:
        with open(doc_path, "w") as f:
            f.write(doc())
    elif a.check_doc:
        current = open(doc_path).read() if os.path.exists(doc_path) else ""
        if current != doc():
            sys.exit("docs/errors.md is not the table in tests/errors/catalogue.py; run: "
                     "python3 tests/errors/catalogue.py --write-doc")
        print(f"docs/errors.md lists the {len(E)} entries")
    elif a.show:
        for e in E:
            if e["needs"] and e["needs"]():
                print(f"{e['id']}\tskipped: {e['needs']()}", flush=True)
                continue
            code, line, complaint, output = run_entry(e)
            warnings = [l.split("] ", 1)[-1] for l in output.splitlines() if " warning [" in l]
            print(f"{e['id']}\t{code}\t{line}\t{complaint or ''}\t{warnings}", flush=True)
    elif a.entry:
        matches = [e for e in E if e["id"] == a.entry]
        if not matches:
            sys.exit(f"no entry '{a.entry}'")
        skip = matches[0]["needs"] and matches[0]["needs"]()
        if skip:
            print(f"SKIP: {a.entry}: {skip}")
            sys.exit(77)
        problems = check(matches[0])
        if problems:
            sys.exit(f"{a.entry}: " + "; ".join(problems))
        print(f"{a.entry}: ok")
    else:
        ap.error("one of --entry, --show, --list, --write-doc, --check-doc")


if __name__ == "__main__":
    main()
