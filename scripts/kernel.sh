#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# kernel.sh - build the pvlock kernel: Debian's Linux 7.3 source + the
# patch series in kernel/patches + the Rust additions in rust/ +
# tinyconfig with kernel/pvlock.config, built with LLVM=-19.
#
# The tree lives in the cache ($PVLOCK_CACHE/linux-<debian version>), outside
# the repository, and is keyed by everything that went into it:
#   - nothing changed          -> a few seconds (the key matches)
#   - a patch / rust/ changed  -> only the patches from the first changed one
#                                 on are reverted and re-applied, then an
#                                 incremental build
#   - the config changed       -> re-configure, incremental build
#   - empty cache              -> unpack and build from nothing
#
# Variants: PVLOCK_KCONFIG=distro (make kernel CONFIG=distro) adds
# kernel/distro.config on top of the fragment (KVM as modules, NR_CPUS=8192,
# lockdep off), in a tree of its own (linux-<debian version>-distro);
# PVLOCK_KCONFIG=debug adds kernel/debug.config (lockdep, sleep-in-atomic
# and preemption checks, KFENCE) in linux-<debian version>-debug;
# PVLOCK_KCONFIG=kasan adds kernel/debug.config and kernel/kasan.config
# (the debug variant plus KASAN) in linux-<debian version>-kasan.
#
# PVLOCK_PATCHES_UPTO=N applies only the first N patches of the series (for
# building each prefix of the series, scripts/build-series.sh); give it a
# tree of its own (PVLOCK_KDIR_CACHE).
#
# Usage: [PVLOCK_KCONFIG=distro|debug|kasan] scripts/kernel.sh [--print-kdir]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
. "$here/lib.sh"

KSRC_TAR=/usr/src/linux-source-$KVER.tar.xz
VARIANT=${PVLOCK_KCONFIG:-}
FRAGS=("$top/kernel/pvlock.config")
case "$VARIANT" in
"") TREE=${PVLOCK_KDIR_CACHE:-$PVLOCK_CACHE/linux-$KPKGVER} ;;
distro)
	TREE=${PVLOCK_KDIR_CACHE:-$PVLOCK_CACHE/linux-$KPKGVER-distro}
	FRAGS+=("$top/kernel/distro.config")
	;;
debug)
	TREE=${PVLOCK_KDIR_CACHE:-$PVLOCK_CACHE/linux-$KPKGVER-debug}
	FRAGS+=("$top/kernel/debug.config")
	;;
kasan)
	TREE=${PVLOCK_KDIR_CACHE:-$PVLOCK_CACHE/linux-$KPKGVER-kasan}
	FRAGS+=("$top/kernel/debug.config" "$top/kernel/kasan.config")
	;;
*) die "kernel: unknown config variant '$VARIANT' (known: distro, debug, kasan)" ;;
esac
PATCHES=$top/kernel/patches
OVERLAY=$top/rust
BASE=tinyconfig
JOBS=${JOBS:-$(nproc)}
MK=(make -C "$TREE" LLVM=-"$LLVMV")
STATE=$TREE/.pvlock

if [ "${1:-}" = --print-kdir ]; then
	echo "$TREE"
	exit 0
fi

# ---------------------------------------------------------------- checks
for t in "clang-$LLVMV" "ld.lld-$LLVMV" rustc bindgen patch make bc flex bison; do
	command -v "$t" >/dev/null || die "kernel: '$t' not found; run 'make deps' first"
done
[ -e "$KSRC_TAR" ] || die "kernel: $KSRC_TAR not found; run 'make deps' first"

# ---------------------------------------------------------------- the key
tool_versions() {
	"clang-$LLVMV" --version | head -1
	rustc --version
	bindgen --version
}
read_series "$PATCHES" kernel
if [ -n "${PVLOCK_PATCHES_UPTO:-}" ]; then
	[[ $PVLOCK_PATCHES_UPTO =~ ^[0-9]+$ ]] && [ "$PVLOCK_PATCHES_UPTO" -le ${#series[@]} ] ||
		die "kernel: PVLOCK_PATCHES_UPTO=$PVLOCK_PATCHES_UPTO is not a number from 0 to ${#series[@]}"
	series=("${series[@]:0:$PVLOCK_PATCHES_UPTO}")
fi
config_key=$( { echo "$KPKGVER $BASE"; cat "${FRAGS[@]}"; tool_versions; } | sha256sum | cut -c1-16)
src_key=$( { echo "$KPKGVER"; for p in "${series[@]}"; do echo "$p"; cat "$PATCHES/$p"; done
	(cd "$OVERLAY" && find . -type f | LC_ALL=C sort | xargs sha256sum); } | sha256sum | cut -c1-16)
key="$src_key-$config_key"

if [ -f "$STATE/built" ] && [ "$(cat "$STATE/built")" = "$key" ] &&
	[ -f "$TREE/arch/x86/boot/bzImage" ]; then
	log "kernel: cached ($key) in $TREE"
	exit 0
fi

# ---------------------------------------------------------------- source
if [ -d "$TREE" ] && [ ! -f "$STATE/unpacked" ]; then
	warn "kernel: $TREE is incomplete, unpacking again"
	rm -rf "$TREE"
fi
if [ ! -d "$TREE" ]; then
	log "kernel: unpacking $KSRC_TAR into $TREE"
	mkdir -p "$(dirname "$TREE")"
	tmp=$(mktemp -d "$(dirname "$TREE")/.unpack.XXXXXX")
	tar -C "$tmp" -xf "$KSRC_TAR"
	mv "$tmp/linux-source-$KVER" "$TREE"
	rmdir "$tmp"
	mkdir -p "$STATE/applied"
	: >"$STATE/applied/series"
	echo "$KPKGVER" >"$STATE/unpacked"
fi

# ---------------------------------------------------------------- patches
# Keep the longest prefix of what is applied that is identical to the new
# series, revert the rest.
series_kept "$STATE" "$PATCHES"
# Reverting and re-applying rewrites every file those patches touch; a file
# that comes back with the same content keeps its old time stamp, so that
# make rebuilds only what changed (a header included everywhere would
# otherwise cost a full build).
patched_files() {
	sed -n 's|^+++ b/||p; s|^--- a/||p' "$@" 2>/dev/null | LC_ALL=C sort -u
}
mtimes=$STATE/mtimes
: >"$mtimes"
{
	for ((i = keep; i < ${#applied[@]}; i++)); do echo "$STATE/applied/${applied[$i]}"; done
	for ((i = keep; i < ${#series[@]}; i++)); do echo "$PATCHES/${series[$i]}"; done
} | { mapfile -t files; if [ ${#files[@]} -gt 0 ]; then patched_files "${files[@]}"; fi; } |
	while read -r f; do
		# (An if, not &&: a new file, not in the tree yet, must not end
		# the loop with a failure, which set -e and pipefail would take
		# for the script's.)
		if [ -f "$TREE/$f" ]; then
			printf '%s %s %s\n' "$(sha256sum <"$TREE/$f" | cut -c1-64)" \
				"$(stat -c %Y "$TREE/$f")" "$f"
		fi
	done >"$mtimes"
series_revert "$TREE" "$STATE" kernel "remove the tree ('make kernel-clean') and rebuild"
series_apply "$TREE" "$STATE" "$PATCHES" kernel "Linux $KPKGVER"

while read -r sum mtime f; do
	if [ -f "$TREE/$f" ] && [ "$(sha256sum <"$TREE/$f" | cut -c1-64)" = "$sum" ]; then
		touch -m -d "@$mtime" "$TREE/$f"
	fi
done <"$mtimes"

# ---------------------------------------------------------------- rust/ overlay
# Copy only what differs, so unchanged files keep their timestamps; remove
# files a previous overlay added that are gone now.
touch "$STATE/overlay.list"
(cd "$OVERLAY" && find . -type f | LC_ALL=C sort) >"$STATE/overlay.new"
while read -r f; do
	grep -qxF "$f" "$STATE/overlay.new" || { log "kernel: removing rust/${f#./}"; rm -f "$TREE/rust/$f"; }
done <"$STATE/overlay.list"
while read -r f; do
	if ! cmp -s "$OVERLAY/$f" "$TREE/rust/$f"; then
		mkdir -p "$(dirname "$TREE/rust/$f")"
		cp "$OVERLAY/$f" "$TREE/rust/$f"
	fi
done <"$STATE/overlay.new"
mv "$STATE/overlay.new" "$STATE/overlay.list"

# ---------------------------------------------------------------- config
# The fragments merged, a later one's line for a symbol replacing an earlier
# one's: what .config must say after olddefconfig.
want_config() {
	awk '/^(CONFIG_|# CONFIG_)/ { s = ($1 == "#") ? $2 : substr($0, 1, index($0, "=") - 1)
		if (!(s in line)) order[++n] = s; line[s] = $0 }
		END { for (i = 1; i <= n; i++) print line[order[i]] }' "${FRAGS[@]}"
}
if [ ! -f "$TREE/.config" ] || [ "$(cat "$STATE/config" 2>/dev/null)" != "$config_key" ]; then
	log "kernel: configuring ($BASE + ${FRAGS[*]##*/})"
	"${MK[@]}" -s rustavailable >/dev/null 2>"$STATE/rustavailable.log" ||
		{ cat "$STATE/rustavailable.log" >&2; die "kernel: Rust toolchain not usable for the kernel (make rustavailable failed)"; }
	"${MK[@]}" -s "$BASE" >/dev/null
	(cd "$TREE" && scripts/kconfig/merge_config.sh -m .config "${FRAGS[@]}" >/dev/null)
	"${MK[@]}" -s olddefconfig >/dev/null
	bad=0
	while read -r l; do
		if [[ $l == "# CONFIG_"* ]]; then
			s=$(awk '{print $2}' <<<"$l")
			if grep -q "^$s=" "$TREE/.config"; then warn "config: $s is set, the fragment unsets it"; bad=1; fi
		else
			s=${l%%=*}
			got=$(grep -E "^$s=|^# $s is not set" "$TREE/.config" || true)
			if [ "$got" != "$l" ]; then warn "config: want '$l', olddefconfig gave '${got:-nothing}'"; bad=1; fi
		fi
	done < <(want_config)
	[ $bad = 0 ] || die "kernel: ${FRAGS[*]##*/} did not survive olddefconfig (see above)"
	echo "$config_key" >"$STATE/config"
fi

# ---------------------------------------------------------------- build
log "kernel: building (make LLVM=-$LLVMV -j$JOBS); log in $STATE/build.log"
start=$(date +%s)
if ! "${MK[@]}" -j"$JOBS" >"$STATE/build.log" 2>&1; then
	grep -E 'error|Error' "$STATE/build.log" | head -20 >&2 || true
	tail -n 15 "$STATE/build.log" >&2
	die "kernel: build failed (full log: $STATE/build.log)"
fi
if grep -E '(^|/)(arch|kernel|rust|include)/.*(warning:)' "$STATE/build.log" | grep -iE 'pvlock|kvm' >&2; then
	warn "kernel: the build warned in pvlock code (see above)"
fi
echo "$key" >"$STATE/built"
log "kernel: built in $(($(date +%s) - start)) s: $TREE/arch/x86/boot/bzImage"
