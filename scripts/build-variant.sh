#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# build-variant.sh REV NAME KDIR: guest_pvlock as it is at git revision REV,
# built against KDIR into build/variants/guest_pvlock_NAME.ko (module name
# still guest_pvlock). For comparisons in one guest: the tuning sweep
# (tests/bench/gen-sweep.py, a variant written NAME:%NAME) loads it in
# place of the working tree's build, round by round, so that two builds
# of the lock are measured side by side. `make variant REV=... NAME=...`
# calls this.
set -euo pipefail

die() { echo "pvlock: error: $*" >&2; exit 2; }

[ $# -eq 3 ] || die "usage: make variant REV=<git revision> NAME=<name>"
rev=$1 name=$2 kdir=$3
[[ $name =~ ^[a-z0-9]{1,16}$ ]] ||
	die "NAME='$name': 1 to 16 lowercase letters and digits"
cd "$(dirname "$0")/.."
git rev-parse -q --verify "$rev^{commit}" >/dev/null ||
	die "REV='$rev' is not a commit of this repository"
# The kernel built here carries the working tree's kernel crate (rust/) and
# patches (kernel/): a module of a revision that differs there would be
# built against abstractions it was not written for.
if ! git diff --quiet "$rev" -- rust kernel; then
	die "REV='$rev' differs from the working tree in rust/ or kernel/ (git diff $rev -- rust kernel): only guest_pvlock/ may differ"
fi

src=$PWD/build/variant-src/$name
rm -rf "$src"
mkdir -p "$src" build/variants
git archive "$rev" guest_pvlock | tar -x -C "$src"
echo 'obj-m += guest_pvlock/' >"$src/Kbuild"
log=$(mktemp)
if ! make -C "$kdir" M="$src" LLVM=-19 modules >"$log" 2>&1; then
	grep -E '^(error|warning)|error:' -A6 "$log" | head -40 >&2
	rm -f "$log"
	die "the build of guest_pvlock at $rev failed"
fi
rm -f "$log"
out=build/variants/guest_pvlock_$name.ko
cp "$src/guest_pvlock/guest_pvlock.ko" "$out"
echo "$out: guest_pvlock at $(git rev-parse --short "$rev")"
echo "vmtest: --extra $PWD/$out:lib/modules/$(cat "$kdir/include/config/kernel.release")/extra/guest_pvlock_$name.ko"
