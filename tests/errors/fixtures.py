"""Inputs for the catalogue of bad inputs (tests/errors/catalogue.py), written byte by byte with the
standard library: copies of the tiny golden model with one thing broken, safetensors files with any header,
a torch.save zip with a hand-written pickle, small GLUE data roots."""
import json
import os
import shutil
import struct
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(REPO, "tests", "data", "golden", "tiny_bert")          # 2 layers x 4 heads, 3 labels
TINY_REG = os.path.join(REPO, "tests", "data", "golden", "tiny_bert_reg")  # the same with 1 output (STS-B)


def read_safetensors(path):
    """(header dict in file order, data bytes)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def raw_safetensors(header_text, data, length=None):
    """A file with this header text (bytes or str) and data; `length` overrides the declared length."""
    if isinstance(header_text, str):
        header_text = header_text.encode()
    return struct.pack("<Q", len(header_text) if length is None else length) + header_text + data


def safetensors_bytes(header, data):
    return raw_safetensors(json.dumps(header, separators=(",", ":")), data)


def copy_tiny(dst, config=None, drop_config=(), source=TINY):
    """A copy of the tiny model at dst with config.json keys changed (None deletes) or dropped."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(source, dst)
    if config or drop_config:
        path = os.path.join(dst, "config.json")
        with open(path) as f:
            c = json.load(f)
        for k, v in (config or {}).items():
            c[k] = v
        for k in drop_config:
            c.pop(k, None)
        with open(path, "w") as f:
            json.dump(c, f, indent=2)
    return dst


def edit_weights(model, edit):
    """Rewrites model/model.safetensors as edit(header, data) -> bytes."""
    path = os.path.join(model, "model.safetensors")
    header, data = read_safetensors(path)
    with open(path, "wb") as f:
        f.write(edit(header, data))


def rebuild(header, data, replace=None, drop=()):
    """A valid file with the same tensors in the same order, less `drop`, with replace[name] =
    (dtype, shape, bytes) swapped in; the offsets are laid out afresh."""
    out, chunks, offset = {}, [], 0
    for name, t in header.items():
        if name == "__metadata__":
            out[name] = t
            continue
        if name in drop:
            continue
        a, b = t["data_offsets"]
        dtype, shape, blob = (replace or {}).get(name, (t["dtype"], t["shape"], data[a:b]))
        out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        chunks.append(blob)
        offset += len(blob)
    return safetensors_bytes(out, b"".join(chunks))


def shard_weights(model, n=2, edit=None):
    """Splits model/model.safetensors as transformers' save_pretrained(max_shard_size) does: n shard files of
    consecutive tensors, model-0000i-of-0000n.safetensors, and model.safetensors.index.json. edit(index, shards)
    may change the index dict and the {file name: (header, data)} shards before they are written."""
    path = os.path.join(model, "model.safetensors")
    header, data = read_safetensors(path)
    names = [k for k in header if k != "__metadata__"]
    index = {"metadata": {"total_size": len(data)}, "weight_map": {}}
    shards = {}
    for i in range(n):
        file = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        group = names[i * len(names) // n:(i + 1) * len(names) // n]
        shards[file] = ({"__metadata__": {"format": "pt"}, **{k: header[k] for k in group}}, data)
        index["weight_map"].update({k: file for k in group})
    if edit:
        edit(index, shards)
    os.remove(path)
    for file, (h, d) in shards.items():
        with open(os.path.join(model, file), "wb") as f:
            f.write(rebuild(h, d))
    with open(os.path.join(model, "model.safetensors.index.json"), "w") as f:
        f.write(index if isinstance(index, str) else json.dumps(index, indent=2, sort_keys=True) + "\n")


def set_float(header, data, name, index, value):
    """data with element `index` of float32 tensor `name` set to `value`."""
    start = header[name]["data_offsets"][0] + 4 * index
    return data[:start] + struct.pack("<f", value) + data[start + 4:]


def torch_zip(path, pickle_bytes, records=None):
    """A torch.save-style zip: archive/data.pkl, archive/version and archive/data/<key> records."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle_bytes)
        z.writestr("archive/version", "3\n")
        for key, blob in (records or {}).items():
            z.writestr("archive/data/" + key, blob)


def global_call_pickle(module, name, argument):
    """Protocol 2: module.name(argument) through GLOBAL and REDUCE, i.e. what a malicious torch.save holds."""
    arg = argument.encode()
    return (b"\x80\x02c" + module.encode() + b"\n" + name.encode() + b"\n" +
            b"X" + struct.pack("<I", len(arg)) + arg + b"\x85R.")


MNLI_LABELS = ["entailment", "neutral", "contradiction"]
WORDS_A = ["the movie was great", "i love this film", "the actors played badly", "it is not very fun"]
WORDS_B = ["it was good", "the plot is boring", "he is funny", "they hate it"]


def glue_root(parent):
    """A data root with a small mnli_subset in words of the tiny vocab (3 classes, like the tiny model)."""
    root = os.path.join(parent, "data")
    folder = os.path.join(root, "mnli_subset_textfooler")
    os.makedirs(folder, exist_ok=True)
    for name in ("mnli_matched.tsv", "mnli_mismatched.tsv"):
        with open(os.path.join(folder, name), "w") as f:
            for i in range(12):
                f.write(f"{MNLI_LABELS[i % 3]}\t{WORDS_A[i % 4]} .\t{WORDS_B[(i * 3) % 4]} !\n")
    return root


def task_root(parent, folder, split_file, content):
    """A data root holding only glue/<folder>/<split_file> with these bytes."""
    root = os.path.join(parent, "data")
    os.makedirs(os.path.join(root, "glue", folder), exist_ok=True)
    with open(os.path.join(root, "glue", folder, split_file), "wb") as f:
        f.write(content if isinstance(content, bytes) else content.encode())
    return root


def sst2_rows(n=8):
    return "".join(f"{WORDS_A[i % 4]} .\t{i % 2}\n" for i in range(n))


def stsb_rows(scores):
    head = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    return head + "".join(f"{i}\tmain\tf\t2012\t{i}\tnone\tnone\t{WORDS_A[i % 4]}\t{WORDS_B[i % 4]}\t{s}\n"
                          for i, s in enumerate(scores))


def two_label_tiny(dst):
    """The tiny model cut to 2 labels (the classifier's first two rows), for SST-2 data cases."""
    copy_tiny(dst, config={"id2label": {"0": "negative", "1": "positive"},
                           "label2id": {"negative": 0, "positive": 1}})

    def cut(header, data):
        replace = {}
        for name in ("classifier.weight", "classifier.bias"):
            t = header[name]
            a, b = t["data_offsets"]
            row = (b - a) // t["shape"][0]
            replace[name] = (t["dtype"], [2] + t["shape"][1:], data[a:a + 2 * row])
        return rebuild(header, data, replace)
    edit_weights(dst, cut)
    return dst
