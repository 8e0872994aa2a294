#!/usr/bin/env python3
"""A tagger's data (core/data/token_dataset.h) and entity scores (eval/seqeval.h) against the conllu and seqeval
packages.

Runs hp_token_dataset_dump and compares:
  CoNLL-U      UD English EWT dev (../shared/data/ud_english_ewt/en_ewt-ud-dev.conllu) and a hand-made file with
               multiword ranges and empty nodes, read with UPOS and with XPOS, against conllu.parse_incr: the words
               are the tokens whose id is an int, XPOS None is "_"; each sentence's first token line by a line scan;
               the tag set against sorted(set(...)), as run_ner.py's get_label_list makes it;
  JSON lines   records written by json.dumps with integer ner_tags: words, tags as str(), the tag set sorted as ints;
  scores       seqeval.metrics precision_score, recall_score, f1_score (default mode, average="micro") and
               accuracy_score, and get_entities on the sentences joined by seqeval, for hand cases and random BIO
               sequences of several types with deliberately malformed runs (I- after O, a type change inside an
               entity, a lone I-, IOBES and bare tags).

    token_reference.py --python VENV_PYTHON --dump hp_token_dataset_dump --data ../shared/data --scratch DIR
Exit 0 when every check holds, 1 when one fails, 77 (skipped, with a "skipped:" line) without the venv, conllu or
seqeval, or UD English EWT.
"""
import json
import os
import random
import subprocess
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ref_check import expect, finish, start  # noqa: E402

TYPES = ["PER", "LOC", "ORG", "MISC"]


def dump(exe, *args):
    r = subprocess.run([exe, *args], capture_output=True, text=True)
    if r.returncode not in (0, 1) or not r.stdout.strip():
        sys.exit(f"FAIL: {exe} exited {r.returncode}: {r.stderr[-2000:]}")
    return json.loads(r.stdout)


def first_token_lines(path):
    """The 1-based line of each sentence's first token line: a line after a blank one that is not a comment."""
    starts, open_ = [], False
    with open(path, encoding="utf-8-sig") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                open_ = False
            elif not line.startswith("#") and not open_:
                starts.append(n)
                open_ = True
    return starts


def check_conllu(conllu, exe, path, name):
    with open(path, encoding="utf-8") as f:
        ref = [[t for t in s if isinstance(t["id"], int)] for s in conllu.parse_incr(f)]
    lines = first_token_lines(path)
    for column in ("upos", "xpos"):
        got = dump(exe, "read", "--tag-column", column, path)
        if "error" in got:
            expect(False, f"{name} {column}: {got['error']}")
            continue
        ours = got["sentences"]
        expect(len(ours) == len(ref), f"{name} {column}: {len(ref)} sentences")
        words = [[t["form"] for t in s] for s in ref]
        tags = [[t[column] if t[column] is not None else "_" for t in s] for s in ref]
        bad = [i for i, s in enumerate(ours[:len(ref)]) if s["words"] != words[i] or s["tags"] != tags[i]]
        expect(not bad, f"{name} {column}: every word and tag of {sum(map(len, words))} words"
               + (f" (first differing sentence {bad[0]}: {ours[bad[0]]} vs {words[bad[0]]} {tags[bad[0]]})" if bad else ""))
        expect([s["line"] for s in ours] == lines, f"{name} {column}: each sentence's first token line")
        want = sorted({t for s in tags for t in s})
        expect(got["labels"] == want, f"{name} {column}: tag set sorted(set()) ({len(want)} tags)")
        expect(got["is_bio"] is False, f"{name} {column}: not a BIO tag set")


HAND_CONLLU = (
    "# sent_id = a\n# text = I don't know\n"
    "1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_\n"
    "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "2\tdo\tdo\tAUX\t_\t_\t3\taux\t_\t_\n"
    "3\tn't\tnot\tPART\tRB\t_\t0\troot\t_\t_\n"
    "3.1\tknow\tknow\tVERB\tVB\t_\t_\t_\t0:root\t_\n"
    "4\tknow\tknow\tVERB\tVB\t_\t3\tconj\t_\tSpaceAfter=No\n"
    "\n\n"
    "# sent_id = b\n"
    "1-2\tdel\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "1\tde\tde\tADP\tSP\t_\t0\troot\t_\t_\n"
    "2\tel\tel\tDET\tDA\t_\t1\tdet\t_\t_\n"
)


def check_jsonl(exe, d):
    rng = random.Random(7)
    records = [{"id": str(i), "tokens": [f"w{i}_{j}\u00e9" for j in range(rng.randint(1, 9))]} for i in range(40)]
    for r in records:
        r["ner_tags"] = [rng.choice([0, 1, 2, 3, 4, 10, 12]) for _ in r["tokens"]]
    p = os.path.join(d, "ner.jsonl")
    with open(p, "w", encoding="utf-8") as f:
        for i, r in enumerate(records):
            f.write(json.dumps(r, ensure_ascii=bool(i % 2)) + "\n")
    got = dump(exe, "read", p)
    if "error" in got:
        return expect(False, f"JSON lines: {got['error']}")
    expect([s["words"] for s in got["sentences"]] == [r["tokens"] for r in records], "JSON lines: every token")
    expect([s["tags"] for s in got["sentences"]] == [[str(t) for t in r["ner_tags"]] for r in records],
           "JSON lines: every integer tag as str()")
    want = [str(t) for t in sorted({t for r in records for t in r["ner_tags"]})]
    expect(got["labels"] == want, f"JSON lines: tag set sorted as ints {want}")


def random_bio(rng, n):
    """n tags: well-formed entities mostly, with I- after O, type changes inside an entity, lone I-."""
    tags = []
    while len(tags) < n:
        r = rng.random()
        if r < 0.45:
            tags.append("O")
        elif r < 0.85:
            t = rng.choice(TYPES)
            tags += ["B-" + t] + ["I-" + t] * rng.randint(0, 3)
        elif r < 0.93:
            tags += ["I-" + rng.choice(TYPES)] * rng.randint(1, 2)  # I- after O (or at the start)
        else:
            a, b = rng.sample(TYPES, 2)
            tags += ["B-" + a, "I-" + b]  # the type changes inside an entity
    return tags[:n]


def perturb(rng, gold):
    """A tagger's mistakes: a wrong type, B- read as I-, an entity missed or invented, a boundary moved."""
    pred = list(gold)
    for i in range(len(pred)):
        r = rng.random()
        if r < 0.05:
            pred[i] = "O"
        elif r < 0.10:
            pred[i] = rng.choice(["B-", "I-"]) + rng.choice(TYPES)
        elif r < 0.14 and pred[i] != "O":
            pred[i] = ("I-" if pred[i].startswith("B-") else "B-") + pred[i][2:]
    return pred


def hand_cases():
    readme_gold = [["O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    readme_pred = [["O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    odd = [["S-PER", "B-LOC", "E-LOC", "I-LOC", "O", "E-ORG"], ["B-I-X", "I-I-X", "B", "I"], ["PER", "PER", "O"],
           [".", "I-A", "."], ["\u00c9X", "O"], ["X", "B-A"], [], ["I-A", "I-B", "B-B", "E-B", "S-A", "I-A"]]
    odd_pred = [list(reversed(s)) for s in odd]
    return [
        (readme_gold, readme_pred),
        ([["B-NP", "I-NP", "O"]], [["I-NP", "I-NP", "O"]]),
        ([["O", "O"]], [["O", "O"]]),
        ([["O"]], [["B-X"]]),
        ([["B-A"], ["X", "B-A"]], [["B-A"], ["O", "B-A"]]),
        (odd, odd_pred),
        (odd_pred, odd),
    ]


def check_scores(seqeval, exe, d):
    from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score
    from seqeval.metrics.sequence_labeling import get_entities
    rng = random.Random(20240601)
    cases = hand_cases()
    for _ in range(6):
        gold = [random_bio(rng, rng.randint(1, 30)) for _ in range(300)]
        cases.append((gold, [perturb(rng, s) for s in gold]))
    p = os.path.join(d, "cases.json")
    with open(p, "w", encoding="utf-8") as f:
        json.dump([{"gold": g, "pred": q} for g, q in cases], f)
    got = dump(exe, "score", p)
    if isinstance(got, dict):
        return expect(False, f"scores: {got.get('error')}")
    worst = 0.0
    for i, ((gold, pred), ours) in enumerate(zip(cases, got)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # seqeval warns of undefined scores and of tags that are not NE tags
            want = {"precision": precision_score(gold, pred), "recall": recall_score(gold, pred),
                    "f1": f1_score(gold, pred),
                    "accuracy": accuracy_score(gold, pred) if any(gold) else 0.0}  # seqeval divides by 0
            ents = [list(e) for e in get_entities(gold)]
        diffs = {k: abs(ours[k] - float(v)) for k, v in want.items()}
        worst = max(worst, *diffs.values())
        kind = "hand" if i < len(cases) - 6 else "random"
        expect(all(v <= 1e-12 for v in diffs.values()),
               f"scores, {kind} case {i}: ours {[ours[k] for k in want]} seqeval {[float(v) for v in want.values()]}")
        expect(ours["entities"] == ents, f"entities, {kind} case {i}: {len(ents)} chunks as get_entities")
    print(f"largest score difference from seqeval: {worst:.3g}")


def main():
    args, mods = start(("dump", "data", "scratch"), ("conllu", "seqeval"), "scripts/setup_python.sh pins both")
    ewt = os.path.join(args.data, "ud_english_ewt", "en_ewt-ud-dev.conllu")
    if not os.path.exists(ewt):
        print(f"skipped: UD English EWT not found at {ewt}; put ../shared beside the repository")
        return 77
    check_conllu(mods["conllu"], args.dump, ewt, "UD English EWT dev")
    hand = os.path.join(args.scratch, "hand.conllu")
    with open(hand, "w", encoding="utf-8") as f:
        f.write(HAND_CONLLU)
    check_conllu(mods["conllu"], args.dump, hand, "ranges and empty nodes")
    check_jsonl(args.dump, args.scratch)
    check_scores(mods["seqeval"], args.dump, args.scratch)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
