#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Summarises sweep runs (vmtest's result JSON): writes/s per variant,
each run and the median, against the native and upstream-PV medians of the
same L1 boot, the spread of the variant's own runs (coefficient of
variation), locktorture's per-writer Max/Min (median), and the pvlock
counters that explain them; for a run with several variant guests
(gen-sweep --guests), each guest's. Then the paired
comparison: the ratio of two variants in each round, and the median of
those ratios with a distribution-free interval (order statistics, at least
95% coverage; the rule of tools/pvlock-bench's `stats::interval_rank`).
The nat-1 and up-1 medians come from guests of their own, whose
boot-to-boot spread is large on this platform; the variant `upstream` is
measured in the variants' own guest, paired.

    tests/bench/sweep-report.py RUN.json [RUN.json ...]

Given several runs (of the same code), it reports each, then the paired
ratios of all their rounds pooled."""
import json
import math
import statistics
import sys


def measurements(n):
    """The guest's measurements: locktorture runs, or (a hackbench sweep)
    hackbench runs as loops per second, 1 / their time."""
    if n.get("hackbench"):
        return [{"per_sec": 1 / h["time"] if h.get("time") else 0} for h in n["hackbench"]]
    return n.get("locktorture", [])


def num(x):
    """writes/s as integers; hackbench's loops/s (about 1) with 3 digits."""
    return "%.0f" % x if x >= 100 else "%.3g" % x


def rates(n):
    return [lt.get("per_sec") or 0 for lt in measurements(n)]


def summary(path):
    """Prints one run's summary; returns its variants and paired rounds
    (of every variant guest, for a run with several)."""
    nodes = json.load(open(path))["result"]["nodes"]
    print("== %s" % path)
    base = {}
    for g in ("nat-1", "up-1"):
        r = rates(nodes.get(g, {}))
        base[g] = statistics.median(r) if r else float("nan")
        print("%-8s %s median %.0f" % (g, " ".join("%.0f" % x for x in r), base[g]))
    variants, rounds = [], []
    for g in sorted(n for n in nodes if n.startswith("pv-")) or ["pv-1"]:
        if g != "pv-1" or len([n for n in nodes if n.startswith("pv-")]) > 1:
            print("-- %s" % g)
        v, r = guest(nodes.get(g, {}), base)
        variants += [x for x in v if x not in variants]
        rounds += r
    return variants, rounds


def guest(pv, base):
    """Prints one variant guest's runs; returns its variants and rounds."""
    names = [o.split("=", 1)[1] for o in pv.get("out", []) if o.startswith("variant=")]
    by = {}
    stats = pv.get("stats") or []
    j = 0  # the variant "upstream" runs without guest_pvlock: no stat step
    for i, lt in enumerate(measurements(pv)):
        if i < len(names):
            s = {}
            if names[i] != "upstream":
                s = stats[j] if j < len(stats) else {}
                j += 1
            fair = (lt.get("max") or 0) / lt["min"] if lt.get("min") else float("nan")
            by.setdefault(names[i], []).append((lt.get("per_sec") or 0, fair, s))
    for name, runs in by.items():
        xs = [x for x, _, _ in runs]
        m = statistics.median(xs)
        # The spread of the variant's own runs (coefficient of variation)
        # and the median of locktorture's per-writer Max/Min.
        cv = statistics.pstdev(xs) / statistics.mean(xs) if len(xs) > 1 and m else float("nan")
        fair = statistics.median(f for _, f, _ in runs)
        c = [s.get("dirs", {}).get("guest", {}).get("counters", {}) for _, _, s in runs]
        keys = ("taken_slow", "taken_steal", "taken_pending", "halts_head", "halts_node", "halts_early", "kicks", "yields")
        tot = {k: sum(x.get(k, 0) for x in c) // max(1, len(c)) for k in keys}
        print("%-10s %s median %s  cv %.0f%%  max/min %.2f  /native %.2f  /upstream %.2f  %s" % (
            name, " ".join(num(x) for x in xs), num(m), 100 * cv, fair, m / base["nat-1"], m / base["up-1"],
            " ".join("%s=%d" % kv for kv in tot.items())))
    variants = list(dict.fromkeys(names))
    rounds = [dict(zip(names[i:i + len(variants)], rates(pv)[i:i + len(variants)]))
              for i in range(0, len(names) - len(variants) + 1, len(variants))]
    return variants, rounds


def interval(xs):
    """The widest-k order-statistic interval with >= 95% coverage."""
    n = len(xs)
    k, cov = 1, 1 - 2 / 2**n
    for j in range(1, n // 2 + 1):
        c = 1 - 2 * sum(math.comb(n, i) for i in range(j)) / 2**n
        if c >= 0.95:
            k, cov = j, c
    return xs[k - 1], xs[n - k], cov


def paired(variants, rounds, title):
    """Every two variants, each against the one before it in the order
    upstream, default, then as given."""
    order = [v for v in ("upstream", "default") if v in variants]
    order += [v for v in variants if v not in order]
    print("%s (%d rounds):" % (title, len(rounds)))
    for i, ref in enumerate(order):
        for v in order[i + 1:]:
            xs = sorted(r[v] / r[ref] for r in rounds if r.get(v) and r.get(ref))
            if not xs:
                continue
            lo, hi, cov = interval(xs)
            print("  %-10s / %-10s median %.3f [%.3f, %.3f] (%.1f%%), above 1 in %d of %d" % (
                v, ref, statistics.median(xs), lo, hi, 100 * cov, sum(x > 1 for x in xs), len(xs)))


if len(sys.argv) < 2:
    sys.exit("usage: sweep-report.py RUN.json [RUN.json ...]")
pooled_variants, pooled_rounds = [], []
for path in sys.argv[1:]:
    variants, rounds = summary(path)
    paired(variants, rounds, "paired, per round")
    pooled_variants += [v for v in variants if v not in pooled_variants]
    pooled_rounds += rounds
if len(sys.argv) > 2:
    paired(pooled_variants, pooled_rounds, "paired, every run pooled")
