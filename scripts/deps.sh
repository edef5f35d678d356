#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# deps.sh - install what a fresh Debian 12 (bookworm) machine needs to build
# and run pvlock.  Idempotent: on a machine that has everything it checks and
# exits in seconds without touching apt.
#
#   - Debian packages: kernel and QEMU build tools (and the deb-src lines
#     of the backports, for Debian's source of QEMU, scripts/qemu.sh),
#     clang/lld/llvm-19, busybox-static, rt-tests (hackbench) and stress-ng, for the benchmark,
#     qemu-system-x86 (bookworm-backports), linux-source-7.3 (trixie-backports,
#     pinned to priority 100 and installed by exact version only)
#   - rustup component rust-src, bindgen-cli (cargo install, pinned version)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need_root_for_apt() {
	[ "$(id -u)" = 0 ] && return 0
	command -v sudo >/dev/null || die "deps: installing Debian packages needs root (or sudo)"
	SUDO=sudo
}
SUDO=

APT_PKGS=(make gcc bc flex bison libelf-dev libssl-dev cpio kmod dwarves rsync
	python3 xz-utils time patch busybox-static rt-tests stress-ng
	ninja-build pkg-config libglib2.0-dev libpixman-1-dev libattr1-dev
	libcap-ng-dev python3-venv qemu-utils
	"clang-$LLVMV" "lld-$LLVMV" "llvm-$LLVMV" "libclang-$LLVMV-dev")

src_file() { printf '%s\n' "$@"; }

# --- apt suites --------------------------------------------------------------
BPO_LIST=/etc/apt/sources.list.d/pvlock-backports.sources
BPO_PIN=/etc/apt/preferences.d/pvlock-trixie-backports
# The machine's own Debian archive, as its main sources name it.
DEB_URI=$(awk '$1 == "URIs:" && $2 !~ /-security$/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null)
[ -n "$DEB_URI" ] || DEB_URI=$(awk '$1 == "deb" && $2 !~ /^\[/ && $2 !~ /-security/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
[ -n "$DEB_URI" ] || { echo "deps: no Debian archive in this machine's apt sources" >&2; exit 1; }
want_sources=$(cat <<S
# added by pvlock scripts/deps.sh
Types: deb deb-src
URIs: $DEB_URI
Suites: bookworm-backports trixie-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
S
)
want_pin=$(cat <<'S'
# added by pvlock scripts/deps.sh: nothing is taken from trixie-backports
# unless asked for by exact version (linux-source-7.3)
Package: *
Pin: release n=trixie-backports
Pin-Priority: 100
S
)

missing=()
for p in "${APT_PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
qemu_ok=0
if command -v qemu-system-x86_64 >/dev/null; then
	qv=$(qemu-system-x86_64 --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p;q')
	# qboot.rom (qemu-system-data): the L2 guests' firmware
	[ "${qv:-0}" -ge 8 ] && [ -e /usr/share/qemu/qboot.rom ] && qemu_ok=1
fi
src_ok=0
[ -e "/usr/src/linux-source-$KVER.tar.xz" ] && src_ok=1

if [ ${#missing[@]} -gt 0 ] || [ $qemu_ok = 0 ] || [ $src_ok = 0 ]; then
	need_root_for_apt
	log "deps: installing Debian packages"
	changed=0
	if [ "$(cat $BPO_LIST 2>/dev/null)" != "$want_sources" ]; then
		printf '%s\n' "$want_sources" | $SUDO tee $BPO_LIST >/dev/null; changed=1
	fi
	if [ "$(cat $BPO_PIN 2>/dev/null)" != "$want_pin" ]; then
		printf '%s\n' "$want_pin" | $SUDO tee $BPO_PIN >/dev/null; changed=1
	fi
	apt_get() {
		local try
		for try in 1 2 3 4 5; do
			$SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@" && return 0
			warn "apt-get $* failed (try $try), retrying in 20 s"; sleep 20
		done
		die "deps: apt-get $* failed"
	}
	apt_get update -qq
	[ ${#missing[@]} -gt 0 ] && apt_get install -y -q --no-install-recommends "${missing[@]}"
	[ $qemu_ok = 1 ] || apt_get install -y -q --no-install-recommends -t bookworm-backports qemu-system-x86 qemu-system-data
	[ $src_ok = 1 ] || apt_get install -y -q --no-install-recommends "linux-source-$KVER=$KPKGVER"
	: "$changed"
fi
[ -e "/usr/src/linux-source-$KVER.tar.xz" ] || die "deps: /usr/src/linux-source-$KVER.tar.xz missing after install"

# --- Rust --------------------------------------------------------------------
command -v rustup >/dev/null || die "deps: rustup not found (the machine's Rust toolchain is installed with rustup)"
sysroot=$(rustc --print sysroot)
if [ ! -e "$sysroot/lib/rustlib/src/rust/library/core/src/lib.rs" ]; then
	log "deps: rustup component add rust-src"
	rustup component add rust-src
fi
if ! bindgen --version 2>/dev/null | grep -q "bindgen $BINDGEN_VER"; then
	log "deps: cargo install bindgen-cli $BINDGEN_VER (about 2 minutes)"
	LIBCLANG_PATH=$LIBCLANG_PATH cargo install bindgen-cli --version "$BINDGEN_VER" --locked
fi
log "deps: all present"
