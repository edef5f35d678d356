# SPDX-License-Identifier: GPL-2.0
# lib.sh - settings and helpers shared by the pvlock build scripts.
KVER=${KVER:-7.3}
KPKGVER=${KPKGVER:-7.3.4-1~bpo13+1}
LLVMV=${LLVMV:-19}
BINDGEN_VER=${BINDGEN_VER:-0.72.1}
export LIBCLANG_PATH=${LIBCLANG_PATH:-/usr/lib/llvm-$LLVMV/lib}
export PATH=$HOME/.cargo/bin:$PATH
PVLOCK_CACHE=${PVLOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pvlock}

log() { printf '==> %s\n' "$*" >&2; }
warn() { printf 'pvlock: warning: %s\n' "$*" >&2; }
die() { printf 'pvlock: error: %s\n' "$*" >&2; exit 1; }
# The project's QEMU (scripts/qemu.sh): Debian's source of the packaged one.
QVER=${QVER:-10.0.2}
QPKGVER=${QPKGVER:-1:10.0.2+ds-2+deb13u1~bpo12+1}
