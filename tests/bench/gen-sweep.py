#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Writes tests/bench/sweep-<OC>.toml: one L1 boot with a native, an
upstream-PV and a guest_pvlock L2 (host_kvm force=1) of the same size, the
last running locktorture once per parameter variant per round, the
variants rotated from round to round. A tuning aid: the benchmark
(tools/pvlock-bench) decides the goals.

    tests/bench/gen-sweep.py 1x 4 'default:' 'nostats:stats=N' ...
    vmtest run tests/bench/sweep-1x.toml --retries 0
    tests/bench/sweep-report.py build/vmtest/sweep-1x.json

The variant named `upstream` runs with guest_pvlock unloaded (the
kernel's own PV spinlock) and loads it again after: upstream measured in
the same guest, the same round, as the variants. Parameters written
`@name=value` are load-time ones (`kick`): the variant reloads
guest_pvlock with them, and reloads it plainly after. `%NAME` runs another
build of guest_pvlock, `make variant REV=<revision> NAME=NAME`
(build/variants/guest_pvlock_NAME.ko, which vmtest puts in the image with
the `--extra` argument this prints), in place of the working tree's, the
same way: two builds of the lock side by side in one guest.

    tests/bench/gen-sweep.py 2x 16 upstream: default: kickcpu:@kick=1
    tests/bench/gen-sweep.py --paired 2x 8 upstream: default: pending:pending=Y
    tests/bench/gen-sweep.py --paired --writers 1 1x 12 upstream: default:
    tests/bench/gen-sweep.py --paired --guests 2 3x 6 upstream: default: eh1:early_halt=1
    tests/bench/gen-sweep.py --paired 1x 12 upstream: default: base:%base

With `--guests 2` (only with --paired) two variant guests share the
overcommit level's vCPUs (3x: two guests of 3 vCPUs) and run the same
steps at the same time: each round's variants run side by side in both,
and the guests meet at a barrier (vmtest's `barrier` step) before each
measurement, so that they measure at the same time.

With `--hackbench LOOPS` the workload is hackbench (groups = the guest's
vCPUs, LOOPS loops) instead of locktorture; the report counts its rate as
loops per second (1 / its time), so that higher is better there too. The
program and its libraries go into the image with the `--extra` arguments
this prints.

    tests/bench/gen-sweep.py --paired --guests 2 --hackbench 30 2x 12 upstream: default: kickcpu:@kick=1
"""
import shutil
import subprocess
import os
import re
import sys

args = sys.argv[1:]
# --paired: only the variants' guest (no native and upstream-PV guests of
# their own, whose native runs can crawl under overcommit).
paired = args[:1] == ["--paired"]
if paired:
    args = args[1:]
# --writers N: locktorture writers (default 2 per vCPU; 1 is uncontended).
writers = None
if args[:1] == ["--writers"]:
    writers, args = int(args[1]), args[2:]
# --guests N: N variant guests at once, the level's vCPUs split among them.
guests = 1
if args[:1] == ["--guests"]:
    guests, args = int(args[1]), args[2:]
    if not paired:
        sys.exit("--guests needs --paired")
# --hackbench LOOPS: hackbench instead of locktorture.
hackbench = None
if args[:1] == ["--hackbench"]:
    hackbench, args = int(args[1]), args[2:]
oc, rounds = args[0], int(args[1])
variants = []
for a in args[2:]:
    name, _, params = a.partition(":")
    variants.append((name, [p for p in params.split(",") if p]))
cpus = {"1x": 2, "2x": 4, "3x": 6}[oc] // guests
writers, secs = writers or 2 * cpus, 5
base = "early_halt=2,yield_to_holder=Y,pending=N,stats=Y,spin_threshold=0".split(",")
P = "/sys/module/guest_pvlock/parameters"


def lt(timeout):
    if hackbench:
        return '{ run = "hackbench", args = ["%d", "%d", "%d"], timeout = %d }' % (cpus, hackbench, timeout, timeout + 20)
    return '{ run = "locktorture", args = ["spin_lock", "%d", "%d"], timeout = %d }' % (writers, secs, secs + timeout)


def measure(pv, name, r, timeout):
    """One measurement of variant `name` in round r; guests that run at
    once meet at a barrier first."""
    if guests > 1:
        pv.append('{ run = "barrier", args = ["r%d-%s"], timeout = 130 }' % (r, name))
    pv.append(lt(timeout))


pv = ['{ run = "load", args = ["guest_pvlock"], timeout = 60 }', '{ run = "online_cpus", timeout = 120 }']
for r in range(rounds):
    k = r % len(variants)
    for name, params in variants[k:] + variants[:k]:
        if name == "upstream":
            pv.append('{ run = "unload", args = ["guest_pvlock"], timeout = 60 }')
            pv.append('{ run = "sh_step", args = ["echo variant=upstream"] }')
            measure(pv, name, r, 60)
            pv.append('{ run = "load", args = ["guest_pvlock"], timeout = 60 }')
            continue
        load = [p[1:] for p in params if p.startswith("@")]
        build = [p[1:] for p in params if p.startswith("%")]
        params = [p for p in params if p[:1] not in "@%"]
        if len(build) > 1:
            sys.exit("variant %s: at most one %%BUILD" % name)
        if load or build:
            module = "guest_pvlock_" + build[0] if build else "guest_pvlock"
            pv.append('{ run = "unload", args = ["guest_pvlock"], timeout = 60 }')
            pv.append('{ run = "load", args = [%s], timeout = 60 }' % ", ".join('"%s"' % p for p in [module] + load))
        sets = "; ".join("echo %s > %s/%s" % (v, P, n) for n, v in (p.split("=") for p in base + params))
        pv.append('{ run = "sh_step", args = ["%s; echo 1 > /sys/kernel/debug/pvlock/zero_stats; echo variant=%s"] }' % (sets, name))
        measure(pv, name, r, 60)
        pv.append('{ run = "stat" }')
        if load or build:
            pv.append('{ run = "unload", args = ["guest_pvlock"], timeout = 60 }')
            pv.append('{ run = "load", args = ["guest_pvlock"], timeout = 60 }')
plain = [lt(200 if oc != "1x" else 60) for _ in range(min(4, max(2, rounds)))]
builds = sorted({p[1:] for _, ps in variants for p in ps if p.startswith("%")})
for b in builds:
    if not re.fullmatch(r"[a-z0-9]{1,16}", b):
        sys.exit("%%%s: a build is named as for 'make variant NAME=...'" % b)
    if not os.path.exists("build/variants/guest_pvlock_%s.ko" % b):
        sys.exit("build/variants/guest_pvlock_%s.ko is missing: make variant REV=<revision> NAME=%s" % (b, b))
extra = " ".join("--extra build/variants/guest_pvlock_%s.ko:lib/modules/variants/guest_pvlock_%s.ko" % (b, b)
                 for b in builds)
if hackbench:
    # The program, the libraries ldd names and the loader, as pvlock-bench
    # puts them in the image.
    hb = shutil.which("hackbench") or sys.exit("no hackbench here (Debian's rt-tests)")
    files = [hb] + re.findall(r"(/\S+) \(0x", subprocess.run(["ldd", hb], capture_output=True, text=True).stdout)
    extra += "".join(" --extra %s:%s" % (f, f.lstrip("/")) for f in files)
if extra:
    print("run it with: vmtest ... run tests/bench/sweep-%s.toml --retries 0 %s" % (oc, extra.strip()))
out = [
    "# Generated by tests/bench/gen-sweep.py %s" % " ".join(sys.argv[1:]),
    'description = "tuning sweep at %s: %sguest_pvlock variants %s"' % (
        oc, "" if paired else "native, upstream PV, ", ", ".join(n for n, _ in variants)),
    "timeout = 3000",
    "retries = 0",
    "",
    "[l1]",
    "steps = [",
    '  { run = "load", args = ["host_kvm", "force=1"] },',
]
groups = [("nat", "maxcpus=1 nopvspin", ['{ run = "online_cpus", timeout = 120 }'] + plain),
          ("up", "maxcpus=1", ['{ run = "online_cpus", timeout = 120 }'] + plain),
          ("pv", "maxcpus=1", pv)]
if paired:
    groups = groups[2:]
for g, _, _ in groups:
    out.append('  { l2 = ["%s"], timeout = 1200 },' % g)
out.append("]")
for g, cmd, steps in groups:
    out += ["", "[[l2]]", 'group = "%s"' % g, "count = %d" % (guests if g == "pv" else 1),
            "cpus = %d" % cpus, 'cmdline = "%s"' % cmd, "steps = ["]
    out += ["  %s," % s for s in steps]
    out.append("]")
open("tests/bench/sweep-%s.toml" % oc, "w").write("\n".join(out) + "\n")
