#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# qemu.sh - build the project's QEMU: the upstream tarball of Debian's
# source package of the packaged QEMU (the "+ds" tarball, without blobs)
# with the patch series in qemu/patches, x86_64 system emulation only,
# firmware from the packaged QEMU (qemu-system-data, seabios, ipxe-qemu).
#
# Like the kernel (scripts/kernel.sh) the tree lives in the cache
# ($PVLOCK_CACHE/qemu-<version>), outside the repository, keyed by what went
# into it (the tarball's checksum, the patches, the configure options, the
# compiler):
#   - nothing changed          -> a second (the key matches)
#   - a patch changed          -> the patches are reverted and re-applied,
#                                 then an incremental build (ninja)
#   - empty cache              -> fetch, unpack, configure and build (about
#                                 5 min on two cores)
#
# Usage: scripts/qemu.sh [--print-binary]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
. "$here/lib.sh"

TREE=${PVLOCK_QEMU_CACHE:-$PVLOCK_CACHE/qemu-$QVER+ds}
PATCHES=$top/qemu/patches
STATE=$TREE/.pvlock
# Outside the build directory: a binary beside a "qemu-bundle" directory
# takes its data files from there instead of the firmware path.
BIN=$TREE/bin/qemu-system-x86_64
JOBS=${JOBS:-$(nproc)}
# The packaged QEMU's firmware, searched in this order (not relocatable:
# the binary runs from the build tree, and the paths are absolute).
FWPATH=/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu
CONFIGURE=(--target-list=x86_64-softmmu --firmwarepath="$FWPATH"
	--disable-install-blobs --disable-relocatable --disable-docs --disable-werror
	--disable-fdt --enable-virtfs --enable-kvm --enable-tcg
	--disable-gtk --disable-sdl --disable-vnc --disable-opengl
	--disable-spice --disable-curses --disable-libusb --disable-usb-redir
	--disable-tools --disable-guest-agent --disable-xen --disable-slirp
	--disable-capstone --disable-bpf --disable-smartcard
	--disable-pipewire --disable-pa --disable-alsa --disable-oss
	--disable-jack --disable-sndio --disable-dbus-display)

if [ "${1:-}" = --print-binary ]; then
	echo "$BIN"
	exit 0
fi

for t in ninja pkg-config cc python3 patch; do
	command -v "$t" >/dev/null || die "qemu: '$t' not found; run 'make deps' first"
done
read_series "$PATCHES" qemu

# ---------------------------------------------------------------- the source
# Debian's source package, fetched with apt-get source (scripts/deps.sh
# enables the deb-src lines); only its upstream tarball is used, checked
# against the checksum apt's index gives.
TARBALL=$PVLOCK_CACHE/src/qemu_$QVER+ds.orig.tar.xz
want_sum=$(apt-cache showsrc qemu 2>/dev/null |
	awk -v v="$QPKGVER" -v f="qemu_$QVER+ds.orig.tar.xz" '/^Package:/ { ver = "" } /^Version:/ { ver = $2 }
		/^Checksums-Sha256:/ { s = 1; next } /^[^ ]/ { s = 0 } s && ver == v && $3 == f && !got { print $1; got = 1 }')
[ -n "$want_sum" ] || die "qemu: apt knows no source package qemu=$QPKGVER (run 'make deps')"
if [ ! -f "$TARBALL" ] || [ "$(sha256sum <"$TARBALL" | cut -c1-64)" != "$want_sum" ]; then
	log "qemu: fetching Debian's source package qemu=$QPKGVER"
	mkdir -p "$PVLOCK_CACHE/src"
	dl=$(mktemp -d "$PVLOCK_CACHE/src/.dl.XXXXXX")
	# The Debian part of the package may be missing from the archive;
	# the upstream tarball is all this build uses.
	(cd "$dl" && apt-get source --download-only "qemu=$QPKGVER" >apt.log 2>&1) || true
	[ -f "$dl/${TARBALL##*/}" ] || { tail -5 "$dl/apt.log" >&2; rm -rf "$dl"; die "qemu: could not fetch ${TARBALL##*/}"; }
	[ "$(sha256sum <"$dl/${TARBALL##*/}" | cut -c1-64)" = "$want_sum" ] ||
		{ rm -rf "$dl"; die "qemu: ${TARBALL##*/} does not match its checksum"; }
	mv "$dl/${TARBALL##*/}" "$TARBALL"
	rm -rf "$dl"
fi

tool_versions() { cc --version | head -1; ninja --version; python3 --version; }
config_key=$( { echo "$want_sum"; printf '%s\n' "${CONFIGURE[@]}"; tool_versions; } | sha256sum | cut -c1-16)
src_key=$( { for p in "${series[@]}"; do echo "$p"; cat "$PATCHES/$p"; done; } | sha256sum | cut -c1-16)
key="$src_key-$config_key"
if [ -f "$STATE/built" ] && [ "$(cat "$STATE/built")" = "$key" ] && [ -x "$BIN" ]; then
	log "qemu: cached ($key) in $TREE"
	exit 0
fi

if [ -d "$TREE" ] && [ "$(cat "$STATE/unpacked" 2>/dev/null)" != "$want_sum" ]; then
	warn "qemu: $TREE is incomplete or from another tarball, unpacking again"
	rm -rf "$TREE"
fi
if [ ! -d "$TREE" ]; then
	log "qemu: unpacking ${TARBALL##*/} into $TREE"
	tmp=$(mktemp -d "$PVLOCK_CACHE/.unpack.XXXXXX")
	tar -C "$tmp" -xf "$TARBALL"
	mv "$tmp/qemu-$QVER" "$TREE"
	rmdir "$tmp"
	# The +ds tarball has no EDK2 images, which the build would unpack
	# when it finds bzip2: the x86 guests here boot with SeaBIOS/qboot.
	sed -i 's/^    unpack_edk2_blobs = bzip2.found()$/    unpack_edk2_blobs = false/' "$TREE/meson.build"
	grep -q '^    unpack_edk2_blobs = false$' "$TREE/meson.build" || die "qemu: cannot turn off the EDK2 unpacking in meson.build"
	# Nor the Python wheels QEMU's configure installs meson from; these
	# are the versions QEMU pins (pythondeps.toml).
	python3 -m pip download -q --no-deps --only-binary=:all: -d "$TREE/python/wheels" \
		meson==1.5.0 pycotap==1.3.1 || die "qemu: could not download the meson and pycotap wheels"
	mkdir -p "$STATE/applied"
	: >"$STATE/applied/series"
	echo "$want_sum" >"$STATE/unpacked"
fi

# ---------------------------------------------------------------- patches
series_kept "$STATE" "$PATCHES"
series_revert "$TREE" "$STATE" qemu "remove the tree ($TREE) and rebuild"
series_apply "$TREE" "$STATE" "$PATCHES" qemu "QEMU $QVER"

# ---------------------------------------------------------------- build
start=$(date +%s)
if [ "$(cat "$STATE/config" 2>/dev/null)" != "$config_key" ]; then
	log "qemu: configuring; log in $STATE/configure.log"
	rm -rf "$TREE/build"
	(cd "$TREE" && ./configure "${CONFIGURE[@]}") >"$STATE/configure.log" 2>&1 ||
		{ tail -n 20 "$STATE/configure.log" >&2; die "qemu: configure failed (log: $STATE/configure.log)"; }
	echo "$config_key" >"$STATE/config"
fi
log "qemu: building (ninja -j$JOBS); log in $STATE/build.log"
if ! ninja -C "$TREE/build" -j"$JOBS" qemu-system-x86_64 >"$STATE/build.log" 2>&1; then
	grep -E 'error' "$STATE/build.log" | head -20 >&2 || true
	tail -n 15 "$STATE/build.log" >&2
	die "qemu: build failed (full log: $STATE/build.log)"
fi
mkdir -p "$TREE/bin"
cp "$TREE/build/qemu-system-x86_64" "$BIN.new"
mv "$BIN.new" "$BIN"
echo "$key" >"$STATE/built"
log "qemu: built in $(($(date +%s) - start)) s: $BIN"
