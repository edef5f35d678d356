#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# build-series.sh - build every prefix of the kernel patch series, in order,
# in a tree of its own ($PVLOCK_CACHE/linux-<version>-series): the series is
# bisectable if each prefix builds. Patch by patch the build is incremental
# (kernel.sh applies one more patch each time); with an empty tree the first
# build is a whole one. The default configuration, and with CONFIG=distro
# (PVLOCK_KCONFIG=distro) the distro variant's.
#
# Usage: scripts/build-series.sh [FIRST [LAST]]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
. "$here/lib.sh"

n=$(grep -cvE '^[[:space:]]*(#|$)' "$top/kernel/patches/series")
first=${1:-1}
last=${2:-$n}
export PVLOCK_KDIR_CACHE=${PVLOCK_KDIR_CACHE:-$PVLOCK_CACHE/linux-$KPKGVER-series${PVLOCK_KCONFIG:+-$PVLOCK_KCONFIG}}
for ((k = first; k <= last; k++)); do
	p=$(grep -vE '^[[:space:]]*(#|$)' "$top/kernel/patches/series" | sed -n "${k}p")
	log "series: building patches 1-$k of $n (up to $p)"
	t0=$(date +%s)
	PVLOCK_PATCHES_UPTO=$k "$here/kernel.sh" || die "series: patches 1-$k ($p) do not build"
	printf 'series: 1-%d built in %d s (%s)\n' "$k" $(($(date +%s) - t0)) "$p"
done
log "series: every prefix from 1-$first to 1-$last builds ($PVLOCK_KDIR_CACHE)"
