#!/usr/bin/env python3
# Goldens for analysis/stats (STYLE.md section 9.4): scipy and statsmodels are the independent reference
# for hp::analysis's t-test, Holm / BH corrections, Spearman rho, ranks and hypergeometric tail; numpy's
# eigh for classical MDS.
#
# Pinned versions (Debian 12 apt packages, seen through the venv that scripts/setup_python.sh makes):
#   python3 3.11, python3-numpy 1.24.2, python3-scipy 1.10.1, python3-statsmodels 0.13.5
# Run from the repo root:
#   ~/.cache/headprune/venv/bin/python tests/golden/make_stats_goldens.py
# Writes tests/data/golden/analysis_stats.json (byte-identical across runs, < 200 KB). JSON has no NaN, so
# NaN is written as null (an input entry to ignore, or an expected NaN).
import json
import math
import os
import sys

import numpy as np
import scipy
import statsmodels
from scipy import stats
from statsmodels.stats.multitest import multipletests

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(REPO, "tests", "data", "golden", "analysis_stats.json")
ALPHA = 0.05
MAX_BYTES = 200_000
PINNED = {"numpy": (np.__version__, "1.24.2"), "scipy": (scipy.__version__, "1.10.1"),
          "statsmodels": (statsmodels.__version__, "0.13.5")}


def num(v):
    """A float for JSON: NaN -> None; Python's repr round-trips every double exactly."""
    v = float(v)
    return None if math.isnan(v) else v


def nums(a):
    return [num(v) for v in a]


def ttest_cases(rng):
    """One-sided t-tests, H0: mean <= tau; includes n = 2 and 3, far tails both ways, NaN entries."""
    def standardized(n):  # exact sample mean 0 and sd 1 (to rounding), so t = shift * sqrt(n) is chosen
        z = rng.normal(size=n)
        return (z - z.mean()) / z.std(ddof=1)

    def shift_for(p, n):  # mean - tau that gives p-value p
        return stats.t.isf(p, n - 1) / math.sqrt(n)

    tau = 3.0
    samples = [
        ("n2", rng.normal(3.5, 1.0, 2), tau),
        ("n3", rng.normal(3.2, 0.5, 3), tau),
        ("n30_near_tau", rng.normal(3.05, 1.0, 30), tau),
        ("n30_below_tau", rng.normal(2.4, 1.0, 30), tau),
        ("n1000", rng.normal(3.03, 1.0, 1000), tau),
        ("tau0_n12", rng.exponential(0.4, 12), 0.3),
        ("tail_p1e-30_n1000", tau + shift_for(1e-30, 1000) + standardized(1000), tau),
        ("tail_p1e-30_n30", tau + shift_for(1e-30, 30) + standardized(30), tau),
        ("p_1-1e-12_n1000", tau + shift_for(1.0 - 1e-12, 1000) + standardized(1000), tau),
    ]
    with_nan = rng.normal(3.4, 0.8, 25)
    with_nan[[0, 7, 24]] = np.nan
    samples.append(("nan_entries", with_nan, tau))
    cases = []
    for name, x, t0 in samples:
        kept = x[~np.isnan(x)]
        r = stats.ttest_1samp(kept, t0, alternative="greater")
        cases.append({"name": name, "x": nums(x), "tau": t0, "n": int(kept.size), "mean": num(np.mean(kept)),
                      "sd": num(np.std(kept, ddof=1)), "t": num(r.statistic), "p": num(r.pvalue)})
    return cases


def family_cases(rng):
    """p-value families for Holm and BH: ties and NaN, values on both rules' thresholds, 720 random."""
    ties = np.array([0.01, 0.01, 0.04, 0.04, 0.04, 0.2, 0.0, 1.0, 0.5, 0.01, np.nan, 0.003, 0.003, 0.9,
                     np.nan, 0.049, 0.0125, 0.0125])
    m = 20  # Holm thresholds alpha / (m - i); statsmodels' own p * k rounds above alpha for m >= 11
    holm_edge = rng.permutation([ALPHA / (m - i) for i in range(m)])
    m = 44  # BH thresholds alpha / m * k; m = 44 has a k where p / (k / m) rounds above alpha
    bh_edge = rng.permutation([ALPHA / m * k for k in range(1, m + 1)])
    random = rng.uniform(size=720)
    small = rng.choice(720, size=60, replace=False)
    random[small] = 10.0 ** -rng.uniform(1.0, 9.0, size=60)
    cases = []
    for name, p in [("ties_nan", ties), ("holm_thresholds", holm_edge), ("bh_thresholds", bh_edge),
                    ("random720", random)]:
        ok = ~np.isnan(p)
        case = {"name": name, "p": nums(p), "alpha": ALPHA}
        for method in ("holm", "fdr_bh"):
            reject = np.zeros(p.size, dtype=bool)
            corrected = np.full(p.size, np.nan)
            reject[ok], corrected[ok], _, _ = multipletests(p[ok], alpha=ALPHA, method=method)
            case[method] = {"corrected": nums(corrected), "reject": [bool(b) for b in reject]}
        cases.append(case)
    return cases


def spearman_cases(rng):
    """Spearman rho with ties on both sides; NaN pairs are dropped before scipy sees them."""
    x1 = rng.integers(0, 6, 40).astype(float)
    y1 = x1 + rng.integers(0, 3, 40)
    x2, y2 = rng.normal(size=30), rng.normal(size=30)
    y2 = y2 + 0.5 * x2
    x2[[3, 11]] = np.nan
    y2[[11, 20]] = np.nan
    x3 = rng.normal(size=25)
    y3 = np.round(-x3 ** 3 + 0.3 * rng.normal(size=25), 1)
    x4 = rng.normal(size=144)
    y4 = np.round(x4 + rng.normal(size=144), 1)
    cases = []
    for name, x, y in [("int_ties", x1, y1), ("nan_pairs", x2, y2), ("negative_rounded", x3, y3),
                       ("heads144", x4, y4)]:
        ok = ~(np.isnan(x) | np.isnan(y))
        rho = stats.spearmanr(x[ok], y[ok]).correlation
        cases.append({"name": name, "x": nums(x), "y": nums(y), "rho": num(rho)})
    return cases


def rank_cases():
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0, -0.0, 0.0])
    return [{"x": nums(x), "ranks": nums(stats.rankdata(x))}]


def hypergeom_cases():
    """(k, N, K, n): P(X >= k), including k at and past both ends of the support and a far tail."""
    args = [(5, 144, 40, 20), (12, 144, 40, 20), (20, 144, 40, 20), (0, 144, 40, 20), (21, 144, 40, 20),
            (1, 144, 1, 1), (30, 144, 60, 72), (55, 144, 60, 72), (50, 720, 100, 300), (3, 10, 8, 5),
            (4, 10, 8, 5), (5, 10, 8, 5), (2, 144, 0, 30), (0, 144, 144, 144)]
    return [{"k": k, "N": N, "K": K, "n": n, "sf": num(stats.hypergeom.sf(k - 1, N, K, n))}
            for k, N, K, n in args]


def mds_case(rng):
    """A non-Euclidean dissimilarity (distances plus symmetric noise) with well-separated top eigenvalues."""
    pts = rng.normal(size=(9, 4)) * np.array([3.0, 1.5, 0.6, 0.3])
    d = np.sqrt(((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1))
    noise = np.abs(rng.normal(scale=0.2, size=d.shape))
    d = d + (noise + noise.T) / 2
    np.fill_diagonal(d, 0.0)
    n = d.shape[0]
    j = np.eye(n) - np.ones((n, n)) / n
    w, v = np.linalg.eigh(-0.5 * j @ (d * d) @ j)
    assert w[-1] - w[-2] > 0.05 * w[-1] and w[-2] - w[-3] > 0.05 * w[-1], "eigenvalues too close"
    x = v[:, [-1, -2]] * np.sqrt(np.maximum(w[[-1, -2]], 0.0))
    for axis in range(2):
        if x[np.argmax(np.abs(x[:, axis])), axis] < 0:
            x[:, axis] = -x[:, axis]
    return {"d": [nums(row) for row in d], "coords": [nums(row) for row in x]}


def main():
    for name, (have, want) in PINNED.items():
        if not have.startswith(want):
            sys.exit(f"{name} {have} found, the goldens are pinned to {want}; see the header")
    rng = np.random.default_rng(20190601)
    golden = {
        "versions": {name: have for name, (have, _) in PINNED.items()},
        "ttest": ttest_cases(rng),
        "families": family_cases(rng),
        "spearman": spearman_cases(rng),
        "ranks": rank_cases(),
        "hypergeom": hypergeom_cases(),
        "mds": mds_case(rng),
    }
    text = json.dumps(golden, indent=1) + "\n"
    if len(text) > MAX_BYTES:
        sys.exit(f"{OUT} would be {len(text)} bytes, over {MAX_BYTES}; shrink the cases")
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {OUT} ({len(text)} bytes)")


if __name__ == "__main__":
    main()
