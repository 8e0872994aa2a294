#!/usr/bin/env python3
"""Data-parallel runs (#13): 2 processes on localhost with Gloo, 1 thread each, against 1 process.

    tests/dist/data_parallel.py --prune build/bin/prune --case NAME [--port P]

Cases (each a CTest test, dist.NAME):
  prune      the pruning run: every criterion's importance within 1e-5 relative, the curves' metrics, the
             exactly-N mask and the final metrics equal to one process's
  train      `prune train` in exact-N target mode on a dropout-free copy of the tiny model: the loss of every
             step within 1e-5 relative, the gates' expected count, the final mask and metrics equal
  train_uneven  as train with batches of 7 over 2 ranks and each epoch ending on a batch of 1
  train_swaps   a budget target distilling with word swaps (NaN labels on about half the rows), batches of 7: the
             task loss the mean over the whole batch's labelled rows however they fall over the ranks
  eval       `prune eval` metrics equal (predictions gathered from both ranks)
  eval_uneven   as eval with batches of 3 over 2 ranks and a last batch of 1
  analyze    `prune analyze` (statistics, sieve scores and their tests, no-op gradients): analysis.json
             equal to one process's within 1e-9 relative (sums in another order), all but timings
  kill       SIGKILL of rank 1 in a training run: rank 0 stops within the timeout with one line naming
             rank 1; relaunched with --resume it ends with the uninterrupted 2-process run's result
  hang       SIGSTOP of rank 1: rank 0 stops after run.dist_timeout_s (10 s here) naming rank 1
  mismatch   a rank started with another seed is refused at start-up (exit 2, the differing line)
  env        launch variables that are incomplete or malformed: one line naming the variable, exit 2
  torchrun   the pruning run under `python3 -m torch.distributed.run --nproc_per_node 2 --no_python` (torch 1.13 spells its options
             with underscores; see the README for the --redirects 1 --tee 1 it needs on Debian 12)
             from the torch prune is built on (HP_TORCHRUN_PYTHON, set by CMake for a pip torch; Debian's python3 for 1.13;
             skipped, exit 77, where that python has no torch)
  torchrun_other  a torchrun of another torch version: one error line per rank that prints names the fix within seconds
             (skipped, exit 77, where no python here has another torch)
Exit 0 when all holds, 1 with the reasons otherwise.
"""
import argparse
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "errors"))
sys.path.insert(0, os.path.join(HERE, "..", "stops"))
import fixtures as fx  # noqa: E402
import kill_resume as kr  # noqa: E402

SKIP = 77
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


def rank_env(rank, world, port):
    env = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID",
              "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "TORCHELASTIC_USE_AGENT_STORE"):
        env.pop(k, None)
    if world > 1:
        env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return env


def start(prune, args, world, port, per_rank_args=None):
    procs = []
    for r in range(world):
        extra = (per_rank_args or {}).get(r, [])
        procs.append(subprocess.Popen([prune, *args, *extra, "--threads", "1"], env=rank_env(r, world, port),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def finish(procs, timeout=600):
    out = []
    for p in procs:
        o, e = p.communicate(timeout=timeout)
        out.append((p.returncode, o, e))
    return out


def run(prune, args, world, port, per_rank_args=None):
    res = finish(start(prune, args, world, port, per_rank_args))
    for r, (code, _, err) in enumerate(res):
        if code != 0:
            print(f"rank {r} of {world} exited {code}:\n{err[-3000:]}")
    return res


def matrices(folder):
    d = os.path.join(folder, "state", "importance")
    return {n: json.load(open(os.path.join(d, n))) for n in sorted(os.listdir(d))}


def case_prune(prune, tmp, port):
    results = {}
    for world in (1, 2):
        out = os.path.join(tmp, f"prune{world}")
        a = kr.tiny_args("prune", out)
        res = run(prune, a, world, port)
        check(all(c == 0 for c, _, _ in res), f"pruning run with {world} process(es) exits 0")
        results[world] = out
    one, two = results[1], results[2]
    m1, m2 = matrices(one), matrices(two)
    check(sorted(m1) == sorted(m2) and len(m1) == 6, f"the same importance files ({len(m1)})")
    for name in m1:
        worst = max(rel(x, y) for r1, r2 in zip(m1[name], m2.get(name, [])) for x, y in zip(r1, r2))
        check(worst <= 1e-5, f"importance {name}: max relative difference {worst:.2e} <= 1e-5")
    s1, s2 = json.load(open(os.path.join(one, "summary.json"))), json.load(open(os.path.join(two, "summary.json")))
    for c in s1["criteria"]:
        check(s1["criteria"][c]["curve"] == s2["criteria"][c]["curve"], f"curve of {c} equal")
    check(s1["final"]["mask"] == s2["final"]["mask"], f"exact-N mask equal ({s1['final']['mask']})")
    check(s1["final"]["metrics"] == s2["final"]["metrics"], "final metrics equal")
    # Every curve point's predictions, gathered from both ranks' evaluation batches, equal one process's.
    pts = sorted(os.listdir(os.path.join(one, "state", "points")))
    same = [json.load(open(os.path.join(one, "state", "points", n)))["predictions"] ==
            json.load(open(os.path.join(two, "state", "points", n)))["predictions"] for n in pts]
    check(len(pts) == 30 and all(same), f"predictions of all {len(pts)} curve points equal")
    # Only rank 0 wrote: nothing but the run's own files, no leftovers of a second writer.
    check(sorted(os.listdir(one)) == sorted(os.listdir(two)), "the same files in both run folders")


def train_args(out, model, extra=(), steps=60, batch=6, target=("--target-heads", "5")):
    data = fx.glue_root(os.path.dirname(out))
    return ["train", "--model", model, "--task", "mnli_subset", "--max-seq-len", "32", "--data-root", data,
            "--set", "train.train_split=matched", "--set", "train.eval_split=mismatched", "--out", out,
            *target, "--max-steps", str(steps), "--set", "train.eval_every=20", "--set", "train.save_every=10",
            "--batch", str(batch),
            # fp32: the checks compare runs of different process counts (summation orders) at fp32's tolerances
            "--set", "train.precision=fp32", *extra]


def losses(folder):
    rows = list(csv.DictReader(open(os.path.join(folder, "metrics.csv"))))
    out = {}
    for r in rows:
        out.setdefault(r["key"], []).append(float(r["value"]))
    return out


def no_dropout_model(tmp):
    return fx.copy_tiny(os.path.join(tmp, "tiny_nodrop"),
                        config={"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})


def train_both(prune, tmp, port, name, keys, batch=6, extra=(), target=("--target-heads", "5")):
    """The same training run with 1 and with 2 processes; each of `keys` of metrics.csv equal step for step.
    Returns both train_result.json."""
    model = no_dropout_model(tmp)
    res = {}
    for world in (1, 2):
        out = os.path.join(tmp, f"{name}{world}")
        r = run(prune, train_args(out, model, extra, batch=batch, target=target), world, port)
        check(all(c == 0 for c, _, _ in r), f"{name} run with {world} process(es) exits 0")
        res[world] = out
    l1, l2 = losses(res[1]), losses(res[2])
    for key in keys:
        a, b = l1.get(key, []), l2.get(key, [])
        # Relative to each step's value, floored at 1% of the series' largest: a term near 0 (the distillation's KL
        # at step 0, 5e-4 where it later reaches 1.2) differs by 4e-8 between the orders, 8e-5 of itself on Zen 3.
        floor = 0.01 * max((abs(v) for v in a + b), default=0.0)
        worst = max((abs(x - y) / max(abs(x), abs(y), floor, 1e-12) for x, y in zip(a, b)), default=1.0)
        # 60+ steps of fp32 training whose gradient sums run in another order: Debian's OpenBLAS drifts ~1e-6 apart,
        # PyPI LibTorch 2.11's MKL 1.6e-5 on the loss; a gradient not averaged (x2) or a shard skipped is far above.
        check(len(a) == len(b) >= 60 and worst <= 5e-5, f"{key}: {len(a)} vs {len(b)} steps, max relative difference "
                                                        f"{worst:.2e} <= 5e-5")
    return [json.load(open(os.path.join(res[w], "train_result.json"))) for w in (1, 2)]


def case_train(prune, tmp, port, batch=6, extra=()):
    t1, t2 = train_both(prune, tmp, port, "train",
                        ("train/loss", "train/task_loss", "train/expected_open", "train/grad_norm"), batch, extra)
    check(t1["mask"] == t2["mask"], f"final head mask equal ({t1['mask']})")
    check(t1["heads_kept"] == t2["heads_kept"] == 5, f"exactly 5 heads kept ({t1['heads_kept']}, {t2['heads_kept']})")
    for k in t1["final_metrics"]:
        check(rel(t1["final_metrics"][k], t2["final_metrics"][k]) <= 1e-6, f"final {k} equal")


def case_train_budget(prune, tmp, port):
    """A FLOPs target (gates on heads, FFN neurons and sublayers, distilling hidden states too): 2 processes follow
    1 step for step and land on the same structure."""
    target = ("--target-flops", "0.5", "--set", "gates.lr=0.5", "--distill", "--set", "gates.distill_hidden=1")
    t1, t2 = train_both(prune, tmp, port, "budget",
                        ("train/loss", "train/expected_percent", "train/distill_hidden", "train/grad_norm"),
                        target=target)
    check(t1["mask"] == t2["mask"], "final structure equal")
    check(t1["budget"]["kept"] == t2["budget"]["kept"] and t1["budget"]["kept"] <= 0.5,
          f"on the budget ({t1['budget']['kept']:.4f} of the FLOPs)")


def case_train_swaps(prune, tmp, port):
    """A distillation whose rows the teacher alone labels (gates.distill_augment: about half a batch's rows get NaN
    labels): the task loss is the mean over the whole batch's labelled rows, however they fall over the ranks (7
    rows over 2: 4 and 3)."""
    target = ("--target-flops", "0.5", "--distill", "--set", "gates.distill_augment=1")
    train_both(prune, tmp, port, "swaps", ("train/loss", "train/task_loss", "train/distill", "train/grad_norm"),
               batch=7, target=target)


def case_train_uneven(prune, tmp, port):
    """Batches that do not divide over the ranks: 7 over 2 (4 and 3 rows, so each rank's share of the loss is
    not a half), and 15 examples, so every epoch ends on a batch of 1, smaller than the world (a rank with
    no rows in it)."""
    case_train(prune, tmp, port, batch=7, extra=("--set", "train.max_train_examples=15"))


def case_eval(prune, tmp, port, batch=2):
    # STS-B on the regression head: Pearson and Spearman move with every single prediction, so a rank's
    # rows lost or misplaced in the gather would show.
    scores = [0.5, 4.0, 2.25, 3.0, 1.0, 5.0, 0.0, 2.5, 3.75, 1.5, 4.5, 2.0, 3.25]
    data = fx.task_root(tmp, "STS-B", "dev.tsv", fx.stsb_rows(scores))
    got = {}
    for world in (1, 2):
        out = os.path.join(tmp, f"eval{world}.json")
        args = ["eval", "--model", fx.TINY_REG, "--task", "stsb", "--data-root", data, "--split", "dev",
                "--batch", str(batch), "--max-seq-len", "32", "--output", out]
        r = run(prune, args, world, port)
        check(all(c == 0 for c, _, _ in r), f"eval with {world} process(es) exits 0")
        got[world] = json.load(open(out))
    m1, m2 = got[1]["metrics"], got[2]["metrics"]
    check(set(m1) == {"pearson", "spearman"} and m1 == m2, f"metrics equal: {m1} / {m2}")
    check(got[1]["examples"] == got[2]["examples"] == len(scores) and got[1]["tokens"] == got[2]["tokens"],
          "example and token counts equal")


def case_eval_uneven(prune, tmp, port):
    """Evaluation batches of 3 over 2 ranks (2 and 1 rows) and a last batch of 1 (13 rows)."""
    case_eval(prune, tmp, port, batch=3)


def close(a, b, path, diffs, tol=1e-9):
    """Records where two JSON values differ beyond `tol` relative (timings skipped)."""
    if any(t in path for t in ("seconds", "per_s", "runtime", "elapsed")):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            diffs.append(f"{path}: keys {sorted(set(a) ^ set(b))}")
        for k in set(a) & set(b):
            close(a[k], b[k], f"{path}/{k}", diffs, tol)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            diffs.append(f"{path}: lengths {len(a)} and {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            close(x, y, f"{path}[{i}]", diffs, tol)
    elif isinstance(a, float) and isinstance(b, float):
        if not (a == b or (a != a and b != b) or rel(a, b) <= tol):
            diffs.append(f"{path}: {a} vs {b}")
    elif a != b:
        diffs.append(f"{path}: {a!r} vs {b!r}")


def case_analyze(prune, tmp, port):
    got = {}
    for world in (1, 2):
        out = os.path.join(tmp, f"analyze{world}")
        args = ["analyze", "--model", fx.TINY, "--task", "mnli_subset", "--max-seq-len", "64", "--examples", "24",
                "--batch", "4", "--resamples", "20", "--out", out]
        r = run(prune, args, world, port)
        check(all(c == 0 for c, _, _ in r), f"analyze with {world} process(es) exits 0")
        got[world] = json.load(open(os.path.join(out, "analysis.json")))
        check(not [f for f in os.listdir(os.path.join(out, "state")) if ".rank" in f], "no rank's own pass file is left")
    diffs = []
    close(got[1], got[2], "", diffs)
    check(not diffs, f"analysis.json equal ({len(diffs)} differences{': ' + '; '.join(diffs[:5]) if diffs else ''})")
    check(got[1]["examples"] == 24 and "block" in got[1]["sieve"], "24 pair examples with sieve scores")


def case_kill(prune, tmp, port):
    model = no_dropout_model(tmp)
    full = os.path.join(tmp, "full")
    run(prune, train_args(full, model, steps=400), 2, port)
    out = os.path.join(tmp, "killed")
    a = train_args(out, model, ["--set", "run.dist_timeout_s=30"], steps=400)
    procs = start(prune, a, 2, port + 1)
    # Once the first checkpoint is there, kill rank 1 mid-run.
    deadline = time.time() + 120
    while time.time() < deadline and not os.path.isdir(os.path.join(out, "state")):
        time.sleep(0.05)
    time.sleep(0.3)
    procs[1].send_signal(signal.SIGKILL)
    t0 = time.time()
    _, err = procs[0].communicate(timeout=120)
    code = procs[0].returncode
    took = time.time() - t0
    procs[1].communicate()
    lines = [l for l in err.splitlines() if l.startswith("error:")]
    check(code == 1 and len(lines) == 1, f"rank 0 exits 1 with one error line (exit {code}, {len(lines)} lines)")
    check(bool(lines) and "rank 1 stopped responding" in lines[0] and lines[0].startswith("error: rank 0/2: ") and
          "relaunch" in lines[0],
          f"the line names rank 1 and says how to go on: {lines[:1]}")
    check(took < 30, f"rank 0 stopped {took:.1f} s after the kill (< run.dist_timeout_s = 30)")
    r = run(prune, train_args(out, model, ["--resume", out], steps=400), 2, port + 2)
    check(all(c == 0 for c, _, _ in r), "the relaunch with --resume exits 0")
    # Rank 0 killed instead: it hosts the rendezvous store, and rank 1 says so.
    other = os.path.join(tmp, "killed0")
    procs = start(prune, train_args(other, model, ["--set", "run.dist_timeout_s=30"], steps=400), 2, port + 3)
    while time.time() < deadline + 60 and not os.path.isdir(os.path.join(other, "state")):
        time.sleep(0.05)
    time.sleep(0.3)
    procs[0].send_signal(signal.SIGKILL)
    _, err = procs[1].communicate(timeout=120)
    procs[0].communicate()
    lines = [l for l in err.splitlines() if l.startswith("error:")]
    check(procs[1].returncode == 1 and len(lines) == 1 and lines[0].startswith("error: rank 1/2: ") and
          "rank 0 stopped responding" in lines[0], f"rank 1 names rank 0 when rank 0 dies: {lines}")
    # The run of rank 0's kill resumed by one process: said, and the same run.
    one = subprocess.run([prune, *train_args(other, model, ["--resume", other], steps=400), "--threads", "1"],
                         env=rank_env(0, 1, port), capture_output=True, text=True, timeout=600)
    check(one.returncode == 0 and "saved by 2 process(es) and resumes with 1" in one.stderr,
          f"a 2-process state resumed by 1 process says so and finishes (exit {one.returncode})")
    t_one = json.load(open(os.path.join(other, "train_result.json")))
    t_full = json.load(open(os.path.join(full, "train_result.json")))
    worst = max((rel(x, y) for x, y in zip(losses(full)["train/loss"], losses(other)["train/loss"])), default=1.0)
    # 400 steps of another summation order drift further than 60 do (8.6e-6 measured): 1e-4 here.
    check(t_one["mask"] == t_full["mask"] and worst <= 1e-4,
          f"... and ends as the uninterrupted 2-process run (mask {t_one['mask']}, losses within {worst:.1e})")
    t_res = json.load(open(os.path.join(out, "train_result.json")))
    check(t_full["mask"] == t_res["mask"], f"resumed mask equals the uninterrupted run's ({t_full['mask']})")
    l1, l2 = losses(full)["train/loss"], losses(out)["train/loss"]
    worst = max((rel(x, y) for x, y in zip(l1, l2)), default=1.0)
    check(len(l1) == len(l2) and worst <= 1e-5, f"resumed losses equal the uninterrupted run's ({len(l1)} vs {len(l2)}"
                                                f" steps, max relative difference {worst:.2e})")


def case_hang(prune, tmp, port):
    model = no_dropout_model(tmp)
    out = os.path.join(tmp, "hung")
    procs = start(prune, train_args(out, model, ["--set", "run.dist_timeout_s=10"], steps=2000), 2, port)
    deadline = time.time() + 120
    while time.time() < deadline and not os.path.isdir(os.path.join(out, "state")):
        time.sleep(0.05)
    procs[1].send_signal(signal.SIGSTOP)  # alive but silent: no collective, no heartbeat
    t0 = time.time()
    try:
        _, err = procs[0].communicate(timeout=120)
    finally:
        procs[1].send_signal(signal.SIGKILL)
        procs[1].communicate()
    took = time.time() - t0
    lines = [l for l in err.splitlines() if l.startswith("error:")]
    check(procs[0].returncode == 1 and len(lines) == 1 and "rank 1 stopped responding" in lines[0],
          f"rank 0 stops naming the hung rank 1: {lines}")
    check(10 <= took <= 30, f"after the timeout, not before and not much later ({took:.1f} s, timeout 10 s)")


def case_mismatch(prune, tmp, port):
    out = os.path.join(tmp, "mismatch")
    args = kr.tiny_args("prune", out)
    res = finish(start(prune, args, 2, port, per_rank_args={1: ["--seed", "7"]}), timeout=120)
    codes = [c for c, _, _ in res]
    check(codes == [2, 2], f"both ranks exit 2 ({codes})")
    line1 = [l for l in res[1][2].splitlines() if l.startswith("error:")]
    check(len(line1) == 1 and "rank 1/2" in line1[0] and "seed: 7" in line1[0] and "seed: 42" in line1[0],
          f"rank 1 names the differing line: {line1}")
    check(not os.path.exists(os.path.join(out, "summary.json")), "nothing was run")


def case_env(prune, tmp, port):
    cases = [({"RANK": "0", "WORLD_SIZE": "2"}, "MASTER_ADDR is not set"),
             ({"RANK": "0"}, "RANK is set but WORLD_SIZE is not"),
             ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}, "RANK=2 is not an integer in 0..1"),
             ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "99999"}, "MASTER_PORT=99999"),
             ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"},
              "`prune infer` runs in one process"),
             # SLURM's variables stand in for torchrun's when those are absent.
             ({"SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, "MASTER_ADDR is not set for a run of 2 processes"),
             ({"SLURM_PROCID": "3", "SLURM_NTASKS": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"},
              "SLURM_PROCID=3 is not an integer in 0..1")]
    for env_add, expect in cases:
        env = rank_env(0, 1, port)
        env.update(env_add)
        cmd = [prune, "infer", "--model", fx.TINY, "--input", os.path.join(tmp, "none.txt")] if "infer" in expect else \
              [prune, "eval", "--model", fx.TINY, "--task", "mnli_subset", "--data-root", fx.glue_root(tmp)]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        lines = [l for l in p.stderr.splitlines() if l.startswith("error:")]
        check(p.returncode == 2 and len(lines) == 1 and expect in lines[0], f"{env_add}: exit {p.returncode}, {lines}")


def case_torchrun(prune, tmp, port):
    # The launcher's torch must be the LibTorch prune is built on: the agent's TCPStore and the workers' client speak
    # that version's protocol (a torch 1.13 torchrun and a LibTorch 2.x prune never rendezvous). CMake passes the
    # python beside a pip torch's CMake package; Debian's python3-torch launches the 1.13 build.
    py = os.environ.get("HP_TORCHRUN_PYTHON") or "/usr/bin/python3"
    if subprocess.run([py, "-c", "import torch.distributed.run"], capture_output=True).returncode != 0:
        print(f"skipped: {py} -m torch.distributed.run is not there (apt install python3-torch, or the torch "
              "of the LibTorch prune is built on)")
        sys.exit(SKIP)
    one = os.path.join(tmp, "one")
    run(prune, kr.tiny_args("prune", one), 1, port)
    two = os.path.join(tmp, "torchrun")
    env = rank_env(0, 1, port)
    # --redirects 1 --tee 1: Debian's torch 1.13 on Python 3.11 cannot parse the default "0" of either
    # (its Std flag enum no longer iterates the zero member) and fails before starting anything.
    cmd = [py, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port + 3),
           "--redirects", "1", "--tee", "1",
           "--no_python", prune, *kr.tiny_args("prune", two), "--threads", "1"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    check(p.returncode == 0, f"torchrun exits 0 ({p.returncode}): {p.stderr[-2000:] if p.returncode else ''}")
    if p.returncode == 0:
        s1, s2 = json.load(open(os.path.join(one, "summary.json"))), json.load(open(os.path.join(two, "summary.json")))
        check(s1["criteria"] == s2["criteria"] and s1["final"]["mask"] == s2["final"]["mask"],
              "torchrun's curves and mask equal one process's")
        check("rank 0 of 2 (torchrun" in p.stderr, "the runtime line says rank 0 of 2")


def torch_of(py):
    """major.minor of the torch that `py` imports, or None."""
    p = subprocess.run([py, "-c", "import torch.distributed.run, torch; print(torch.__version__)"],
                       capture_output=True, text=True)
    return ".".join(p.stdout.strip().split(".")[:2]) if p.returncode == 0 else None


def case_torchrun_other(prune, tmp, port):
    """A torchrun of another torch than prune's LibTorch: a rank's one error line says so within seconds (the
    stores' protocols differ: 1.x resets 2.x's handshake, 2.x never answers 1.x), never a hang to the timeout."""
    v = subprocess.run([prune, "--version"], capture_output=True, text=True).stdout
    built = re.search(r"LibTorch (\d+\.\d+)", v).group(1)
    home = os.path.expanduser("~/.cache/headprune")
    candidates = ["/usr/bin/python3", os.environ.get("HP_TORCHRUN_PYTHON", ""), f"{home}/venv-torch2/bin/python"]
    other = next((c for c in candidates if c and os.path.exists(c) and torch_of(c) not in (None, built)), None)
    if other is None:
        print(f"skipped: no python here has a torchrun of a torch other than LibTorch {built} "
              "(scripts/setup.sh --torch pip makes one)")
        sys.exit(SKIP)
    cmd = [other, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port + 3),
           "--redirects", "1", "--tee", "1", "--no_python", prune, *kr.tiny_args("prune", os.path.join(tmp, "other")),
           "--threads", "1"]
    t0 = time.time()
    p = subprocess.run(cmd, env=rank_env(0, 1, port), capture_output=True, text=True, timeout=300)
    seconds = time.time() - t0
    errors = [l for l in p.stderr.splitlines() if l.startswith("error:")]
    check(p.returncode != 0, f"torchrun of torch {torch_of(other)} with LibTorch {built}: fails ({p.returncode})")
    # The agent stops the other rank when the first fails, so one rank or both get to say it.
    check(len(errors) in (1, 2) and all("launch with that torch's own torchrun" in e and f"from torch {built}" in e
                                        for e in errors), f"one line per rank that got to print, naming the fix: {errors}")
    check(seconds < 120, f"within seconds, not run.dist_timeout_s (300): {seconds:.0f} s")


CASES = {"prune": case_prune, "train": case_train, "train_uneven": case_train_uneven, "train_budget": case_train_budget,
         "train_swaps": case_train_swaps, "eval": case_eval,
         "eval_uneven": case_eval_uneven, "analyze": case_analyze, "hang": case_hang, "kill": case_kill, "mismatch": case_mismatch,
         "env": case_env, "torchrun": case_torchrun, "torchrun_other": case_torchrun_other}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prune", required=True)
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--port", type=int, default=0, help="MASTER_PORT (default: from the case name, 29600..)")
    a = ap.parse_args()
    port = a.port or 29600 + 10 * sorted(CASES).index(a.case)
    tmp = tempfile.mkdtemp(prefix=f"hp_dist_{a.case}_")
    try:
        CASES[a.case](os.path.abspath(a.prune), tmp, port)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
