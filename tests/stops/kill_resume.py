#!/usr/bin/env python3
"""Hard stops (#15 §4): a run killed with SIGKILL at seeded random moments and resumed each time ends with
exactly the outputs of a run that was never interrupted.

    tests/stops/kill_resume.py --prune build/bin/prune --kind train|gates|prune|budget [--kills 5] [--seed 1]
        [--model DIR] [--task T] [--extra ARGS]   # defaults: the tiny golden model on a small data root

After every kill, every file of the run folder that a resume could read must be whole: JSON parses,
safetensors headers and sizes agree (files still named *.tmp, and the staging folders .NAME.tmp-PID-N of a model folder, are the writer's own and ignored). The final
comparison leaves out only what measures time (examples/s, seconds, latency). Exit 0 when all holds; prints
each kill's moment and what the folder held then.
"""
import argparse
import json
import os
import random
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "errors"))
import fixtures as fx  # noqa: E402

# A model folder's staging folder (core::StagedFolder: .NAME.tmp-PID-N, and .old after a failed swap): the
# writer's own, never read by a resume, and removed by the next writer of NAME.
STAGING = re.compile(r"^\..+\.tmp-\d+-\d+(\.old)?$")
TIMING = ("examples_per_s", "steps_per_s", "seconds", "latency", "_ms", "hf_check", "elapsed", "speedup",
          "fraction_of_bound")


def tiny_args(kind, out):
    data = fx.glue_root(os.path.dirname(out))
    base = ["--model", fx.TINY, "--task", "mnli_subset", "--max-seq-len", "32", "--data-root", data,
            "--set", "train.train_split=matched", "--set", "train.eval_split=mismatched", "--out", out]
    if kind == "train":  # gates with the exact-N controller: the most state a resume must restore
        return ["train", *base, "--target-heads", "5", "--max-steps", "1000", "--set", "train.eval_every=50",
                "--set", "train.save_every=7"]
    if kind == "gates":  # a FLOPs target: head, neuron and sublayer gates, the controller, the layer-distillation map
        return ["train", *base, "--target-flops", "0.5", "--distill", "--set", "gates.distill_hidden=1",
                "--max-steps", "300", "--set", "train.eval_every=50", "--set", "train.save_every=7"]
    common = [*base, "--set", "prune.rank_split=matched", "--set", "prune.eval_split=mismatched",
              "--rank-examples", "12", "--schedule", "0,25,50,75,100", "--set", "prune.attattr_steps=3",
              "--set", "prune.bootstrap=50", "--set", "prune.latency=false", "--set", "eval.batch_size=8",
              "--set", "prune.rank_batch_size=4", "--recover-steps", "20", "--set", "prune.verify=false"]
    if kind == "budget":  # Kwon et al.'s search: mask gradients, budget curves, the slimmed choice, its recovery
        return [*common, "--criteria", "taylor", "--target-flops", "0.5"]
    return [*common, "--target-heads", "3", "--method", "taylor"]


def whole_files(folder):
    """Complaints about files a resume could trust that are not whole."""
    bad = []
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            parts = os.path.relpath(path, folder).split(os.sep)
            if name.endswith(".tmp") or ".tmp" + os.sep in path + os.sep or any(STAGING.match(p) for p in parts):
                continue
            blob = open(path, "rb").read()
            if name.endswith(".json"):
                try:
                    json.loads(blob)
                except ValueError as e:
                    bad.append(f"{path}: not whole JSON ({e})")
            elif name.endswith(".safetensors"):
                if len(blob) < 8:
                    bad.append(f"{path}: {len(blob)} bytes")
                    continue
                (n,) = struct.unpack("<Q", blob[:8])
                try:
                    header = json.loads(blob[8:8 + n])
                    end = max([t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"] + [0])
                    if 8 + n + end != len(blob):
                        bad.append(f"{path}: {len(blob)} bytes, the header needs {8 + n + end}")
                except ValueError as e:
                    bad.append(f"{path}: header not whole ({e})")
    return bad


def without_timing(value):
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if not any(t in k for t in TIMING)}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def csv_without_timing(text):
    rows = [line.split(",") for line in text.splitlines()]
    if not rows:
        return rows
    header = rows[0]
    if "key" in header:  # metrics.csv: step,epoch,key,value rows
        k = header.index("key")
        return [r for r in rows if not any(t in r[k] for t in TIMING)]
    keep = [i for i, h in enumerate(header) if not any(t in h for t in TIMING)]
    return [[r[i] for i in keep if i < len(r)] for r in rows]


def outputs(kind, out):
    """What must be identical: the final records, as bytes or as data less timing."""
    got = {}
    if kind in ("train", "gates"):
        files = ["best/model.safetensors", "head_mask.txt", "state/model.safetensors", "state/run.safetensors", "best/gates.safetensors"]
        got["train_result.json"] = without_timing(json.load(open(os.path.join(out, "train_result.json"))))
        got["metrics.csv"] = csv_without_timing(open(os.path.join(out, "metrics.csv")).read())
    else:
        files = ["model/model.safetensors", "model/config.json", "recover/best/model.safetensors"]
        got["summary.json"] = without_timing(json.load(open(os.path.join(out, "summary.json"))))
        got["curves.csv"] = csv_without_timing(open(os.path.join(out, "curves.csv")).read())
        if kind == "budget":
            files += ["search/model.safetensors"]
            got["search/choice.json"] = without_timing(json.load(open(os.path.join(out, "search", "choice.json"))))
            got["budget_curves.csv"] = csv_without_timing(open(os.path.join(out, "budget_curves.csv")).read())
    for f in files:
        path = os.path.join(out, f)
        if not os.path.exists(path):
            got[f] = None
        elif f.endswith(".safetensors"):  # every tensor's bytes, less the timings a run's history records
            header, data = fx.read_safetensors(path)
            got[f] = {k: (t["dtype"], t["shape"], data[t["data_offsets"][0]:t["data_offsets"][1]])
                      for k, t in header.items() if k != "__metadata__" and not any(x in k for x in TIMING)}
        else:
            got[f] = open(path, "rb").read()
    return got


def run(prune, args, timeout=600):
    return subprocess.run([prune, *args], capture_output=True, text=True, timeout=timeout)


def resume_args(kind, args, out):
    """The command that continues the run in `out`: a training run with a saved state uses --resume."""
    if kind in ("train", "gates") and (os.path.exists(out + "/state/state.json") or os.path.exists(out + "/state.old/state.json")):
        i = args.index("--out")
        return args[:i] + ["--resume", out] + args[i + 2:]
    return args


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prune", default=os.path.join(fx.REPO, "build", "bin", "prune"))
    ap.add_argument("--kind", choices=["train", "gates", "prune", "budget"], required=True)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--args", help="the run's arguments without --out (default: the tiny model's run)")
    ap.add_argument("--scratch", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "hp_stops"))
    a = ap.parse_args()
    prune = os.path.abspath(a.prune)
    scratch = os.path.join(a.scratch, a.kind)
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    ref_out, out = os.path.join(scratch, "uninterrupted"), os.path.join(scratch, "killed")

    def args_for(folder):
        if a.args:
            return [*shlex.split(a.args), "--out", folder]
        return tiny_args(a.kind, folder)

    t0 = time.monotonic()
    ref = run(prune, args_for(ref_out))
    duration = time.monotonic() - t0
    if ref.returncode != 0:
        sys.exit("the uninterrupted run failed:\n" + ref.stdout[-2000:] + ref.stderr[-2000:])
    print(f"uninterrupted run: {duration:.1f} s", flush=True)

    rng = random.Random(a.seed)
    args = args_for(out)
    problems, kills = [], 0
    for k in range(a.kills):
        moment = rng.uniform(0.1, 0.35) * duration  # each resume goes on from its last record: 5 kills land
        cmd = resume_args(a.kind, args, out)
        p = subprocess.Popen([prune, *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            p.wait(timeout=moment)
            finished = True
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait()
            finished = False
        if finished:
            if p.returncode != 0:
                problems.append(f"launch {k + 1} failed by itself: {p.stderr.read()[-1500:]}")
            print(f"kill {k + 1}: the run finished before {moment:.2f} s", flush=True)
            break
        kills += 1
        held = sum(len(f) for _, _, f in os.walk(out)) if os.path.isdir(out) else 0
        print(f"kill {k + 1}: SIGKILL at {moment:.2f} s, the folder held {held} files", flush=True)
        problems += [f"after kill {k + 1}: {b}" for b in whole_files(out)] if os.path.isdir(out) else []
    final = run(prune, resume_args(a.kind, args, out))
    if final.returncode != 0:
        problems.append("the final resume failed:\n" + final.stdout[-1500:] + final.stderr[-1500:])
    else:
        want, got = outputs(a.kind, ref_out), outputs(a.kind, out)
        for name in want:
            if want[name] != got[name]:
                problems.append(f"{name} differs from the uninterrupted run's")
    if os.path.exists(os.path.join(out, "run.lock")):
        problems.append("run.lock is left after the run finished")
    left = [os.path.join(r, d) for r, dirs, _ in os.walk(out) for d in dirs if STAGING.match(d)]
    if left:
        problems.append(f"staging folders of killed writers are left after the run finished: {left}")
    print(f"{a.kind}: {kills} kills (seed {a.seed}), resumed each time; final outputs "
          f"{'identical to' if not problems else 'NOT identical to'} the uninterrupted run's", flush=True)
    if problems:
        sys.exit("\n".join(problems))


if __name__ == "__main__":
    main()
