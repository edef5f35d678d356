#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Summarises a sweep run (vmtest's result JSON): writes/s per variant,
each run and the median, against the native and upstream-PV medians of the
same L1 boot, and the pvlock counters that explain them."""
import json
import statistics
import sys

d = json.load(open(sys.argv[1]))
nodes = d["result"]["nodes"]


def rates(n):
    return [lt.get("per_sec") or 0 for lt in n.get("locktorture", [])]


base = {}
for g in ("nat-1", "up-1"):
    r = rates(nodes.get(g, {}))
    base[g] = statistics.median(r) if r else float("nan")
    print("%-8s %s median %.0f" % (g, " ".join("%.0f" % x for x in r), base[g]))
pv = nodes.get("pv-1", {})
names = [o.split("=", 1)[1] for o in pv.get("out", []) if o.startswith("variant=")]
by = {}
for i, x in enumerate(rates(pv)):
    if i < len(names):
        by.setdefault(names[i], []).append((x, (pv.get("stats") or [{}] * 99)[i]))
for name, runs in by.items():
    xs = [x for x, _ in runs]
    m = statistics.median(xs)
    c = [s.get("dirs", {}).get("guest", {}).get("counters", {}) for _, s in runs]
    keys = ("taken_slow", "taken_steal", "halts_head", "halts_node", "halts_early", "kicks", "yields")
    tot = {k: sum(x.get(k, 0) for x in c) // max(1, len(c)) for k in keys}
    print("%-10s %s median %.0f  /native %.2f  /upstream %.2f  %s" % (
        name, " ".join("%.0f" % x for x in xs), m, m / base["nat-1"], m / base["up-1"],
        " ".join("%s=%d" % kv for kv in tot.items())))
