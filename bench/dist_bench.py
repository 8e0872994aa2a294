#!/usr/bin/env python3
"""Data-parallel scaling on this machine (#13): the same work with 1 process x P threads and P processes x 1
thread (the same cores), on the real all-MiniLM-L6-v2 and SST-2.

    bench/dist_bench.py [--procs 2] [--prune build/bin/prune] [--only eval,train,prune]

  eval   `prune eval` of the fine-tuned model on SST-2 dev (872 examples)
  train  `prune train`: 60 steps of batch 32 from the pretrained model, then the dev evaluation
  prune  the pruning run's curves (6 criteria, 11 points each, 256 ranking examples) from the fine-tuned
         model runs/sst2/finetune/best (made by the README's main command)
Prints wall seconds per stage (from the log's "done:" lines), the speedup, and each rank's line from
core/dist/distributed.cpp: collectives, bytes all-reduced and the share of the run spent in them.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FT = os.path.join(REPO, "runs", "sst2", "finetune", "best")
PRETRAINED = os.path.join(REPO, "checkpoints", "all-MiniLM-L6-v2")


def launch(prune, args, procs, threads, port):
    ps = []
    t0 = time.time()
    for r in range(procs):
        env = dict(os.environ)
        if procs > 1:
            env.update(RANK=str(r), WORLD_SIZE=str(procs), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(procs),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        ps.append(subprocess.Popen([prune, *args, "--threads", str(threads)], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True))
    outs = [p.communicate() for p in ps]
    wall = time.time() - t0
    for r, (p, (_, err)) in enumerate(zip(ps, outs)):
        if p.returncode != 0:
            sys.exit(f"rank {r} exited {p.returncode}:\n{err[-3000:]}")
    return wall, outs[0][1]


def stages(log):
    """[(stage, seconds)] from the log's '[tag] done: N unit in T' lines."""
    out = []
    for m in re.finditer(r"\[([^\]]+)\] done: \S+ \S+ in ([0-9.hms]+)", log):
        t = m.group(2)
        secs = 0.0
        for v, u in re.findall(r"([0-9.]+)([hms])", t):
            secs += float(v) * {"h": 3600, "m": 60, "s": 1}[u]
        out.append((m.group(1), secs))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--prune", default=os.path.join(REPO, "build", "bin", "prune"))
    ap.add_argument("--only", default="eval,train,prune")
    a = ap.parse_args()
    cores = os.cpu_count()
    tmp = tempfile.mkdtemp(prefix="hp_dist_bench_")
    jobs = {
        # the result goes to each run's own --out folder (an eval result is replaced only by the same evaluation)
        "eval": ["eval", "--model", FT, "--task", "sst2", "--split", "dev"],
        "train": ["train", "--config", os.path.join(REPO, "configs", "sst2.yaml"), "--max-steps", "60",
                  "--set", "train.eval_every=0", "--set", "train.max_train_examples=4000"],
        "prune": ["--config", os.path.join(REPO, "configs", "sst2.yaml"), "--model", FT, "--set", "prune.latency=false",
                  "--set", "prune.verify=false"],
    }
    if not os.path.isdir(FT):
        sys.exit(f"{FT} is missing: run the README's main command first (it fine-tunes into runs/sst2)")
    port = 29750
    for name in a.only.split(","):
        res = {}
        for procs, threads in ((1, cores), (a.procs, max(1, cores // a.procs))):
            out = os.path.join(tmp, f"{name}{procs}")
            shutil.rmtree(out, ignore_errors=True)
            args = [*jobs[name], "--out", out]
            port += 1
            wall, log = launch(a.prune, args, procs, threads, port)
            res[procs] = wall
            print(f"{name}: {procs} process(es) x {threads} thread(s): {wall:.1f} s wall")
            for stage, secs in stages(log):
                print(f"    {stage:24s} {secs:8.1f} s")
            for line in log.splitlines():
                if "[dist]" in line:
                    print("    rank 0: " + line.split("[dist] ", 1)[1])
        print(f"{name}: speedup x{res[1] / res[a.procs]:.2f} with {a.procs} processes on {cores} cores\n")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
