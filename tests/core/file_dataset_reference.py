#!/usr/bin/env python3
"""A user's data files (core/data/file_dataset.h) against pandas, json and the csv module.

Writes tricky CSV, TSV and JSON-lines files with pandas (to_csv: quoting, line ends and delimiters inside fields, a
BOM by encoding="utf-8-sig", lineterminator="\\r\\n") and json, runs hp_file_dataset_dump on them and compares:
  cells        with pandas.read_csv(dtype=str, keep_default_na=False) (the text as written, no NaN guessing),
               and for JSON lines with json.loads (str as is, int as str(), float as repr(), bool as true/false,
               null or a missing key as "");
  row lines    with the csv module's line_num (where each row starts), for JSON lines the non-empty lines;
  columns      with run_glue.py's rule, written out below;
  labels       with run_glue.py's: pandas' (or json's) typed column, sorted(unique) for classes, float -> regression;
  examples     each label as the index into that list, or the score;
  errors       a validation label absent from training, a missing column: the message names file:line.

    file_dataset_reference.py --python VENV_PYTHON --dump hp_file_dataset_dump --scratch DIR
Exit 0 when every check holds, 1 when one fails, 77 (skipped, with a "skipped:" line) without the venv or pandas.
"""
import csv
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ref_check import expect, finish, start  # noqa: E402



def dump(exe, files, *flags):
    r = subprocess.run([exe, *flags, *files], capture_output=True, text=True)
    if r.returncode not in (0, 1) or not r.stdout.strip():
        sys.exit(f"FAIL: {exe} exited {r.returncode}: {r.stderr[-2000:]}")
    return json.loads(r.stdout)


def run_glue_columns(columns, label="label"):
    """run_glue.py's choice of sentence1_key, sentence2_key for files of one's own."""
    non_label = [c for c in columns if c != label]
    if "sentence1" in non_label and "sentence2" in non_label:
        return "sentence1", "sentence2"
    return (non_label[0], non_label[1]) if len(non_label) >= 2 else (non_label[0], "")


def run_glue_labels(values):
    """run_glue.py: a float column is regression, else label_list = sorted(unique); names as text."""
    if any(isinstance(v, float) for v in values):
        return "regression", []
    return "classes", [str(v).lower() if isinstance(v, bool) else str(v) for v in sorted(set(values))]


def csv_row_lines(path, sep):
    """The 1-based line where each non-blank row after the header starts, by the csv module."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f, delimiter=sep)
        starts, end = [], 0
        for row in reader:
            if row:
                starts.append(end + 1)
            end = reader.line_num
    return starts[1:]


def check_examples(name, got, texts_a, texts_b, labels, kind, names):
    exs = got["examples"]
    expect(len(exs) == len(texts_a), f"{name}: {len(texts_a)} examples")
    for i, e in enumerate(exs):
        if e["text_a"] != texts_a[i] or e["text_b"] != texts_b[i]:
            expect(False, f"{name}: example {i} text {e['text_a']!r}/{e['text_b']!r}, want {texts_a[i]!r}/{texts_b[i]!r}")
            return
        if labels is None:
            if e["has_label"]:
                expect(False, f"{name}: example {i} has a label in a file without one")
                return
            continue
        want = float(labels[i]) if kind == "regression" else names.index(str(labels[i]))
        if not e["has_label"] or not math.isclose(e["label"], want, rel_tol=1e-6):
            expect(False, f"{name}: example {i} label {e['label']}, want {want}")
            return
    expect(True, f"{name}: every example's texts and label")


def check_delimited(pd, exe, path, sep, name, files=(), flags=()):
    """One CSV/TSV training file (and others read with it) against pandas and the csv module."""
    got = dump(exe, [path, *files], *flags)
    if "error" in got:
        expect(False, f"{name}: {got['error']}")
        return got
    ours = got["files"][0]
    text = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False)
    expect(ours["columns"] == list(text.columns), f"{name}: columns {ours['columns']}")
    expect(ours["rows"] == text.values.tolist(), f"{name}: every cell byte for byte ({len(text)} rows)")
    expect(ours["lines"] == csv_row_lines(path, sep), f"{name}: the line each row starts on (csv.reader)")
    typed = pd.read_csv(path, sep=sep)  # the column as run_glue.py sees it
    a, b = run_glue_columns(list(text.columns))
    expect((got["columns"]["text_a"], got["columns"]["text_b"]) == (a, b), f"{name}: text columns {a!r}, {b!r}")
    labels = typed["label"].tolist()
    kind, names = run_glue_labels(labels)
    expect(got["labels"]["kind"] == kind and got["labels"]["names"] == names, f"{name}: {kind} {names}")
    check_examples(name, ours, text[a].tolist(), text[b].tolist() if b else [""] * len(text), labels, kind, names)
    return got


def tricky_texts():
    return ["a, b", 'say "hi"', "two\nlines", "  spaces kept  ", "tab\there", "caf\u00e9 \u2615 \u65e5\u672c\u8a9e",
            "NA", "None", "007", "", "\U0001F600 emoji", '"quoted whole"', "x" * 3000, "end,\n"]


def csv_cases(pd, exe, d):
    texts = tricky_texts()
    n = len(texts)
    df = pd.DataFrame({"text": texts, "label": [2, 10, 1, 2, 10, 1, 2, 10, 1, 2, 10, 1, 2, 10],
                       "idx": [str(i) for i in range(n)]})
    p = os.path.join(d, "ints.csv")
    df.to_csv(p, index=False)
    check_delimited(pd, exe, p, ",", "CSV, QUOTE_MINIMAL, int labels 1 < 2 < 10, pair (text, idx)")

    nli = pd.DataFrame({"idx": range(n), "sentence2": texts[::-1], "label": ["neutral", "entailment", "contradiction",
                        "\u00fcber", "Zeta", "neutral", "entailment"] * 2, "sentence1": texts})
    p = os.path.join(d, "nli_bom_crlf.csv")
    nli.to_csv(p, index=False, encoding="utf-8-sig", lineterminator="\r\n", quoting=csv.QUOTE_ALL)
    check_delimited(pd, exe, p, ",", "CSV, BOM, CRLF, QUOTE_ALL, text labels, sentence1/sentence2")

    scores = pd.DataFrame({"sentence": texts, "other": texts[::-1], "label": [0.5, 3.2, 4, 1e-3, 5, 2.25, 0] * 2})
    p = os.path.join(d, "scores.tsv")
    scores.to_csv(p, sep="\t", index=False)
    check_delimited(pd, exe, p, "\t", "TSV, tabs and line ends in fields, regression")

    # A validation file with the training columns in another order, a test file without labels, id2label's order.
    dev = os.path.join(d, "dev.csv")
    df.iloc[::-1][["idx", "label", "text"]].to_csv(dev, index=False)
    test = os.path.join(d, "test.csv")
    df[["text", "idx"]].to_csv(test, index=False)
    got = dump(exe, [os.path.join(d, "ints.csv"), dev, test], "--id2label", "10,2,1")
    if "error" in got:
        return expect(False, f"dev and test: {got['error']}")
    expect(got["labels"]["names"] == ["10", "2", "1"], "id2label 10,2,1 (holding every label) keeps its order")
    rev = df.iloc[::-1]
    check_examples("dev.csv (columns reordered, id2label order)", got["files"][1], rev["text"].tolist(),
                   rev["idx"].tolist(), rev["label"].tolist(), "classes", ["10", "2", "1"])
    check_examples("test.csv (no label column)", got["files"][2], df["text"].tolist(), df["idx"].tolist(), None, "", [])

    bad = os.path.join(d, "dev_bad.csv")
    pd.DataFrame({"text": ["a", "b\nc", "d"], "label": [1, 2, 7], "idx": ["0", "1", "2"]}).to_csv(bad, index=False)
    got = dump(exe, [os.path.join(d, "ints.csv"), bad])
    expect(got.get("error", "").startswith(f"{bad}:5: label '7' is not among the training labels [1, 2, 10]"),
           f"a validation label absent from training names its line: {got.get('error')}")
    got = dump(exe, [os.path.join(d, "ints.csv")], "--text-columns", "text,nope")
    expect("data.text_columns names 'nope'" in got.get("error", "") and "[text, label, idx]" in got.get("error", ""),
           f"a missing text column names the key and the columns: {got.get('error')}")


def json_cell(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def jsonl_case(exe, d):
    objs = [{"text": t, "label": i % 3} for i, t in enumerate(tricky_texts())]
    objs[1]["flag"] = True
    objs[2]["flag"] = False
    objs[3]["extra"] = None
    objs[4]["extra"] = 0.5
    objs[5]["extra"] = 1e-07
    objs[6]["extra"] = 12345678901234567890
    objs[7]["extra"] = 3.0
    objs[8]["extra"] = 1.5e300
    objs[9] = {"label": 2, "text": objs[9]["text"]}  # keys in another order
    p = os.path.join(d, "train.jsonl")
    with open(p, "w", encoding="utf-8", newline="\n") as f:
        for i, o in enumerate(objs):
            f.write(json.dumps(o, ensure_ascii=bool(i % 2)) + "\n" + ("\n" if i == 4 else ""))
    got = dump(exe, [p])
    if "error" in got:
        return expect(False, f"JSON lines: {got['error']}")
    ours = got["files"][0]
    columns = []
    for o in objs:
        columns += [k for k in o if k not in columns]
    expect(ours["columns"] == columns, f"JSON lines: columns in first-seen order {columns}")
    rows = [[json_cell(o.get(c)) for c in columns] for o in objs]
    expect(ours["rows"] == rows, "JSON lines: every cell (str, int, float as repr, bool, null, missing)")
    expect(ours["lines"] == list(range(1, 6)) + list(range(7, len(objs) + 2)), "JSON lines: lines, a blank one skipped")
    kind, names = run_glue_labels([o["label"] for o in objs])
    expect(got["labels"]["kind"] == kind and got["labels"]["names"] == names, f"JSON lines: {kind} {names}")
    a, b = run_glue_columns(columns)
    expect((got["columns"]["text_a"], got["columns"]["text_b"]) == (a, b), f"JSON lines: text columns {a!r}, {b!r}")
    check_examples("JSON lines", ours, [json_cell(o.get(a)) for o in objs], [json_cell(o.get(b)) for o in objs],
                   [o["label"] for o in objs], kind, names)


def main():
    args, mods = start(("dump", "scratch"), ("pandas",), "apt-get install python3-pandas; the venv of "
                       "scripts/setup_python.sh sees Debian's packages")
    csv_cases(mods["pandas"], args.dump, args.scratch)
    jsonl_case(args.dump, args.scratch)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
